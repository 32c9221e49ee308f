import type { Knex } from 'knex'
import { MIGRATION_CONFIG } from './src/db/migrations.ts'

/**
 * For ad-hoc knex CLI use against DATABASE_URL (the owner). The release step (`npm run migrate`)
 * is the supported way to migrate: it also installs pg-boss, its queues and the role grants.
 */
const config: Knex.Config = {
  client: 'pg',
  connection: process.env.DATABASE_URL,
  migrations: MIGRATION_CONFIG,
}

export default config
