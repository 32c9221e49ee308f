import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { ringKeys, singleKeyRing, type KeyRing } from '../crypto/key-ring.ts'

/**
 * The keys a process holds: `outboxKey` is the OUTBOX_ENCRYPTION_KEYS ring (first seals, all
 * open); `codeHashKey` is CODE_HASH_KEYS' current key and `codeHashKeys` all of them, current first.
 */
export type Keys = { outboxKey: KeyRing; codeHashKey: Buffer; codeHashKeys: readonly Buffer[] }

/** The runtime keys from configured rings. */
export function keysFromRings(outbox: KeyRing, codeHash: KeyRing): Keys {
  return { outboxKey: outbox, codeHashKey: codeHash[0].key, codeHashKeys: ringKeys(codeHash) }
}

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
  return keysFromRings(
    singleKeyRing(Buffer.from(stored.OUTBOX_ENCRYPTION_KEY ?? '', 'base64')),
    singleKeyRing(Buffer.from(stored.CODE_HASH_KEY ?? '', 'base64')),
  )
}
