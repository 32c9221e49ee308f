import type { Request } from 'express'
import ipaddr from 'ipaddr.js'
import type { Knex } from 'knex'
import { hitRateLimitTx } from '../identity/rate-limits.ts'
import { bucketKey } from '../identity/secrets.ts'

/**
 * A per-client-address limit for the public routes, counted in the database (holds across web
 * processes). Called after the body is validated: a malformed request costs no database work.
 * The address is `req.ip`: the socket's peer, or behind a router the hop TRUST_PROXY names
 * (with it off, a forged X-Forwarded-For is ignored), counted as `clientOf` says.
 */
export function limitPerClient(
  db: Knex,
  secrets: Buffer | readonly Buffer[],
  perMinute: number,
  clock: () => Date,
): (req: Request) => Promise<void> {
  return async (req) => {
    const address = clientOf(req.ip ?? req.socket.remoteAddress ?? 'unknown')
    // One statement, its own transaction: no BEGIN and COMMIT round trips around it.
    await hitRateLimitTx(
      db,
      (Buffer.isBuffer(secrets) ? [secrets] : secrets).map((secret) => bucketKey(secret, 'client', address)),
      { max: perMinute, windowSeconds: 60 },
      clock(),
      'too_many_requests',
    )
  }
}

/**
 * The IPv6 network one client is counted by: a /64, the smallest network a provider gives one
 * subscriber (a mobile device, a home, a server), so no two subscribers share one. A /56 would
 * hold a holder of a /48 to fewer buckets, but lumps together neighbours a carrier numbers from
 * one pool (a /64 per device), and one of them could spend the others' budget.
 */
export const CLIENT_IPV6_PREFIX = 64

/**
 * Who a per-client limit counts: an IPv4 address as it is (an IPv4-mapped IPv6 address as its
 * IPv4 address), an IPv6 address as its /64. A subscriber is given a whole IPv6 network and may
 * use any address in it, so counting each address would let one client take a fresh address for
 * every request and never be limited. The text is canonical, so no spelling of an address (case,
 * zeros, `::`) is a bucket of its own.
 */
export function clientOf(address: string): string {
  if (!ipaddr.isValid(address)) return address
  const parsed = ipaddr.process(address)
  if (parsed.kind() === 'ipv4') return parsed.toString()
  const network = parsed.toByteArray().map((byte, i) => byte & (0xff00 >> Math.max(0, Math.min(8, CLIENT_IPV6_PREFIX - 8 * i))) & 0xff)
  return `${ipaddr.fromByteArray(network).toString()}/${CLIENT_IPV6_PREFIX}`
}

/** Answers no sooner than `ms` after the request began, so a fast path cannot be told from a slow one. */
export async function withMinimumDuration<T>(ms: number, work: () => Promise<T>): Promise<T> {
  const started = performance.now()
  try {
    return await work()
  } finally {
    const left = ms - (performance.now() - started)
    if (left > 0) await new Promise((resolve) => setTimeout(resolve, left))
  }
}
