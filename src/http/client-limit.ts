import type { Socket } from 'node:net'
import type { Request } from 'express'
import type { Knex } from 'knex'
import { hitRateLimit } from '../identity/rate-limits.ts'
import { bucketKey } from '../identity/secrets.ts'
import type { Logger } from '../logging/logger.ts'
import { clientOf } from './client-address.ts'

/**
 * Reads a connection's peer address as the server accepts it. Node asks the kernel when the
 * address is first read and keeps the answer; first read once the connection is gone, it is
 * undefined. A client that sent a compressed body and reset the connection at once was still
 * served (the body inflates off the main thread, after the reset), but `req.ip` read undefined and
 * the client was counted under "unknown", a bucket shared with everyone who did the same.
 */
export function rememberPeerAddress(socket: Socket): void {
  void socket.remoteAddress
}

/**
 * A per-client-address limit for the public routes, counted in the database (holds across web
 * processes). Called before the body is validated, so malformed requests count too:
 * only a body that is not JSON at all is refused earlier, by the parser, with no database work.
 * The address is `req.ip`: the socket's peer (read as the connection was accepted:
 * `rememberPeerAddress`), or behind a router the hop TRUST_PROXY names (with it off, a forged
 * X-Forwarded-For is ignored), counted as `clientOf` says. Answers the client as counted: the
 * budgets sliced per client (src/identity/requester.ts) use the same.
 */
export function limitPerClient(
  db: Knex,
  secrets: Buffer | readonly Buffer[],
  perMinute: number,
  clock: () => Date,
  logger: Logger,
): (req: Request) => Promise<string> {
  let unparsableLogged = false
  return async (req) => {
    const reported = req.ip ?? req.socket.remoteAddress ?? 'unknown'
    const client = clientOf(reported)
    if (client === undefined && !unparsableLogged) {
      // Without the text: behind a router that trusts too much, it is whatever the client chose.
      unparsableLogged = true
      logger.warn(
        'MISCONFIGURATION: the client address is not an IP address; per-client limits count its text as it is (check TRUST_PROXY and the router)',
      )
    }
    // Apart from every address's bucket: no text can name the bucket of an address it does not spell.
    const address = client ?? `text:${reported}`
    // One statement, its own transaction: no BEGIN and COMMIT round trips around it.
    await hitRateLimit(
      db,
      (Buffer.isBuffer(secrets) ? [secrets] : secrets).map((secret) => bucketKey(secret, 'client', address)),
      { max: perMinute, windowSeconds: 60 },
      clock(),
      'too_many_requests',
    )
    return address
  }
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
