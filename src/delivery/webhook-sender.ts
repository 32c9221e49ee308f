import http from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import { WebhookUrlRefusedError } from '../platform/webhook-address-guard.ts'

/** What one POST to an endpoint came to (no body is read beyond its status and Retry-After). */
export type WebhookAnswer =
  | { kind: 'answered'; status: number; retryAfter: string | null }
  | { kind: 'unsent'; failure: 'address_refused' }
  | { kind: 'failed'; failure: 'timeout' | 'connection_failed' }

export type WebhookPost = (request: { url: URL; headers: Record<string, string>; body: string }) => Promise<WebhookAnswer>

/**
 * Posts deliveries through agents whose every connection resolves its host with `lookup` (the SSRF
 * guard): no redirect is followed (node's client never follows one), the body of the answer is
 * drained unread, and the whole exchange is bounded by `timeoutMs`.
 */
export function createWebhookPost(options: { lookup: LookupFunction; timeoutMs: number }): WebhookPost & { close: () => void } {
  const agents = {
    'http:': new http.Agent({ keepAlive: true, lookup: options.lookup }),
    'https:': new https.Agent({ keepAlive: true, lookup: options.lookup }),
  }
  const post = (request: { url: URL; headers: Record<string, string>; body: string }) =>
    new Promise<WebhookAnswer>((resolve) => {
      const transport = request.url.protocol === 'https:' ? https : http
      const req = transport.request(
        request.url,
        {
          method: 'POST',
          agent: agents[request.url.protocol as 'http:' | 'https:'],
          headers: { ...request.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(request.body) },
          timeout: options.timeoutMs,
        },
        (res) => {
          res.resume()
          const retryAfter = res.headers['retry-after'] ?? null
          res.on('end', () => resolve({ kind: 'answered', status: res.statusCode ?? 0, retryAfter }))
          res.on('error', () => resolve({ kind: 'answered', status: res.statusCode ?? 0, retryAfter }))
        },
      )
      const timer = setTimeout(() => req.destroy(Object.assign(new Error('webhook timeout'), { code: 'ETIMEDOUT' })), options.timeoutMs)
      req.on('close', () => clearTimeout(timer))
      req.on('timeout', () => req.destroy(Object.assign(new Error('webhook timeout'), { code: 'ETIMEDOUT' })))
      req.on('error', (error: NodeJS.ErrnoException) => {
        // A forbidden address is final (nothing is sent, ever); a host that did not resolve this once
        // (a DNS blip) is retried like a refused connection, or one SERVFAIL would lose the event.
        if (error instanceof WebhookUrlRefusedError && error.code !== 'webhook_url_unresolvable')
          resolve({ kind: 'unsent', failure: 'address_refused' })
        else resolve({ kind: 'failed', failure: error.code === 'ETIMEDOUT' ? 'timeout' : 'connection_failed' })
      })
      req.end(request.body)
    })
  return Object.assign(post, {
    close: () => {
      agents['http:'].destroy()
      agents['https:'].destroy()
    },
  })
}
