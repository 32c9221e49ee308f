import { createHash, timingSafeEqual } from 'node:crypto'

const digest = (value: string | Buffer) => createHash('sha256').update(value).digest()

/**
 * Whether a presented secret (a token, a key, a signature, a code's hash) equals ours, in time that
 * depends on neither: both are hashed to one length first, then compared with `timingSafeEqual`,
 * so neither the first differing byte nor a difference in length shows. The one comparison of
 * secrets in the product (test/architecture.one-home.test.ts keeps it so).
 */
export function sameSecret(presented: string | Buffer, ours: string | Buffer): boolean {
  return timingSafeEqual(digest(presented), digest(ours))
}
