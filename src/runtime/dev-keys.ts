import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'

export type Keys = { outboxKey: Buffer; codeHashKey: Buffer }

/**
 * Development only: keys generated once and kept in `<dataDir>/keys.json` (git-ignored, 0600),
 * so codes sealed before a restart still open after it.
 */
export async function ensureDevKeys(dataDir: string): Promise<Keys> {
  const file = path.join(dataDir, 'keys.json')
  if (!existsSync(file)) {
    await mkdir(dataDir, { recursive: true })
    const generated = { OUTBOX_ENCRYPTION_KEY: randomBytes(32).toString('base64'), CODE_HASH_KEY: randomBytes(32).toString('base64') }
    await writeFile(file, JSON.stringify(generated), { mode: 0o600, flag: 'wx' }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error
    })
  }
  const stored = JSON.parse(await readFile(file, 'utf8')) as Record<string, string>
  return { outboxKey: Buffer.from(stored.OUTBOX_ENCRYPTION_KEY ?? '', 'base64'), codeHashKey: Buffer.from(stored.CODE_HASH_KEY ?? '', 'base64') }
}
