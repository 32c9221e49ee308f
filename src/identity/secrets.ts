import { createHash, createHmac, randomBytes } from 'node:crypto'
import { hash, verify } from '@node-rs/argon2'

/** A bearer token (session, elevation): 32 random bytes, base64url; only its SHA-256 is stored. */
export function newToken(): { token: string; hash: Buffer } {
  const token = randomBytes(32).toString('base64url')
  return { token, hash: hashToken(token) }
}

export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token).digest()
}

// OWASP's argon2id baseline (19 MiB, 2 passes). 2 is Argon2id in the package's const enum.
const ARGON2 = { algorithm: 2, memoryCost: 19_456, timeCost: 2, parallelism: 1 }

export async function hashPassword(password: string): Promise<string> {
  return await hash(password, ARGON2)
}

// Verified against when there is no account, so a miss costs what a hit costs.
let decoy: Promise<string> | undefined

/** Constant work whether or not the account exists: a missing hash is checked against a decoy. */
export async function verifyPassword(storedHash: string | undefined, password: string): Promise<boolean> {
  if (!storedHash) {
    decoy ??= hashPassword(randomBytes(16).toString('hex'))
    await verify(await decoy, password)
    return false
  }
  return await verify(storedHash, password)
}

/** A rate-limit bucket key: an HMAC, so the table never holds an address. */
export function bucketKey(secret: Buffer, kind: string, value: string): Buffer {
  return createHmac('sha256', secret).update(`${kind}:${value}`).digest()
}

/**
 * The bucket keys of one bucket under every CODE_HASH_KEYS key, current first: hits are written
 * under the first and counted under all (rate-limits.ts), so a key rotation resets no budget.
 */
export function bucketKeys(keys: { codeHashKey: Buffer; codeHashKeys?: readonly Buffer[] }, kind: string, value: string): Buffer[] {
  const ring = keys.codeHashKeys ?? [keys.codeHashKey]
  return ring.map((secret) => bucketKey(secret, kind, value))
}
