import { createHmac, randomInt } from 'node:crypto'
import { sameSecret } from './constant-time.ts'

export const CODE_DIGITS = 6

/** A one-time code: 6 decimal digits from the CSPRNG, as a Buffer the caller can wipe. */
export function generateCode(random: (max: number) => number = randomInt): Buffer {
  return Buffer.from(String(random(10 ** CODE_DIGITS)).padStart(CODE_DIGITS, '0'))
}

/** HMAC-SHA-256 of the code bound to its challenge, so a hash cannot be replayed on another. */
export function hashCode(codeHashKey: Buffer, challengeId: string, code: Buffer | string): Buffer {
  return createHmac('sha256', codeHashKey).update(challengeId).update(':').update(code).digest()
}

/**
 * Constant-time check of a submitted code against the stored hash, under every key of the ring
 * (a code hashed before a CODE_HASH_KEYS rotation still verifies while its key is listed). Every
 * key is tried, so the time taken does not say which one matched.
 */
export function verifyCode(codeHashKeys: Buffer | readonly Buffer[], challengeId: string, code: string, storedHash: Buffer): boolean {
  let matched = false
  for (const key of Buffer.isBuffer(codeHashKeys) ? [codeHashKeys] : codeHashKeys) {
    const candidate = hashCode(key, challengeId, code)
    if (sameSecret(candidate, storedHash)) matched = true
  }
  return matched
}
