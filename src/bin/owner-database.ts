import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { ConfigError, type CoreConfig } from '../../config/schema.ts'
import { runtimeFile } from '../runtime/dev-stack.ts'

/** The owner's database URL for a CLI: DATABASE_URL, or in development the embedded one `npm start` runs. */
export async function ownerDatabaseUrl(config: CoreConfig): Promise<string> {
  if (config.DATABASE_URL) return config.DATABASE_URL
  const file = runtimeFile(config.SEALPOST_DATA_DIR)
  if (config.NODE_ENV === 'production' || config.NODE_ENV === 'staging' || !existsSync(file)) {
    throw new ConfigError([
      {
        variable: 'DATABASE_URL',
        problem: `is not set, and no \`npm start\` has run on the data folder ${config.SEALPOST_DATA_DIR}: start it there first, or set DATABASE_URL to the owner's URL`,
      },
    ])
  }
  return (JSON.parse(await readFile(file, 'utf8')) as { databaseUrl: string }).databaseUrl
}
