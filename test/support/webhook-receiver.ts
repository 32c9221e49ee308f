import { createHmac, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http'
import { createServer as createTcpServer, type AddressInfo } from 'node:net'

/** One POST a receiver got: the Standard Webhooks headers and the raw body. */
export type Received = { id: string; timestamp: string; signature: string; body: string; headers: IncomingHttpHeaders }

/**
 * A local receiver on 127.0.0.1 that records every POST and answers what `answer` says (default
 * 204); `answer` may also be async (to apply the event first).
 */
export async function startWebhookReceiver(
  answer: (
    received: Received,
  ) => Promise<{ status: number; headers?: Record<string, string> }> | { status: number; headers?: Record<string, string> } = () => ({
    status: 204,
  }),
) {
  const received: Received[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const entry: Received = {
        id: String(req.headers['webhook-id']),
        timestamp: String(req.headers['webhook-timestamp']),
        signature: String(req.headers['webhook-signature']),
        body: Buffer.concat(chunks).toString('utf8'),
        headers: req.headers,
      }
      received.push(entry)
      void Promise.resolve(answer(entry)).then(
        (reply) => res.writeHead(reply.status, reply.headers ?? {}).end(),
        () => res.writeHead(500).end(),
      )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    port,
    received,
    events: () => received.map((entry) => JSON.parse(entry.body) as { type: string; timestamp: string; data: Record<string, unknown> }),
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** A TCP listener on 127.0.0.1 that only counts connections: whether anything reached the address at all. */
export async function startConnectionCounter() {
  let connections = 0
  const server = createTcpServer((socket) => {
    connections += 1
    socket.destroy()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/**
 * The Standard Webhooks verification, written from the specification (standard-webhooks.com,
 * "Verifying webhook authenticity"): the signed content is `{msg_id}.{timestamp}.{payload}`, the
 * key is the base64-decoded part of the secret after `whsec_`, the header holds space-separated
 * `v1,<base64 HMAC-SHA256>` entries, and any one matching in constant time verifies.
 */
export function standardWebhooksVerify(secret: string, received: Pick<Received, 'id' | 'timestamp' | 'signature' | 'body'>): boolean {
  const key = Buffer.from(secret.split('_').slice(1).join('_'), 'base64')
  const expected = createHmac('sha256', key).update(`${received.id}.${received.timestamp}.${received.body}`).digest()
  return received.signature.split(' ').some((part) => {
    const [version, value] = part.split(',', 2)
    const given = Buffer.from(value ?? '', 'base64')
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected)
  })
}

/**
 * A receiver on 127.0.0.1 that answers nothing until `release()`: every POST stays open, as with a
 * receiver that hangs until the sender's timeout. Counts the requests still open and those the
 * sender closed (gave up on) before an answer.
 */
export async function startHangingReceiver() {
  const open = new Set<ServerResponse>()
  let received = 0
  let abandoned = 0
  let released = false
  const server = createServer((req, res) => {
    received += 1
    req.resume()
    if (released) {
      res.writeHead(204).end()
      return
    }
    open.add(res)
    res.on('close', () => {
      if (open.delete(res) && !res.writableEnded) abandoned += 1
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received: () => received,
    open: () => open.size,
    /** Requests the sender closed before any answer came (its send timeout). */
    abandoned: () => abandoned,
    /** Answers every open request 204 now, and every later one at once. */
    release() {
      released = true
      for (const res of [...open]) {
        open.delete(res)
        res.writeHead(204).end()
      }
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}
