import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** What the fake answers to one request. */
export type WasenderBehavior =
  | { kind: 'accept'; delayMs?: number }
  /** `delayMs`: the failure comes after that long, as a real provider's error answer does. */
  | { kind: 'status'; status: number; headers?: Record<string, string>; body?: unknown; delayMs?: number }
  /** Counts the message as sent, then never answers: the provider acted, the caller cannot know. */
  | { kind: 'accept-then-hang' }
  | { kind: 'hang' }
  | { kind: 'reset' }
  | { kind: 'garbage' }

/** `finishedAt`: when the exchange ended (answered, or the caller gave up on a hang), Date.now() like `at`. */
export type WasenderRequest = {
  to: string
  text: string
  authorization: string | undefined
  at: number
  accepted: boolean
  finishedAt?: number
}

/**
 * A local Wasender that speaks its API (`POST /api/send-message`, bearer key, `{to, text}` →
 * `{success, data: {msgId}}`) and fails on demand through `behave`.
 */
export async function startFakeWasender(apiKey: string) {
  const requests: WasenderRequest[] = []
  let behave: (call: number, request: WasenderRequest) => WasenderBehavior = () => ({ kind: 'accept' })
  const hanging = new Set<ServerResponse>()
  let nextId = 1

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    if (req.method !== 'POST' || req.url !== '/api/send-message') {
      res.writeHead(404).end()
      return
    }
    let parsed: { to?: string; text?: string }
    try {
      parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"success":false}')
      return
    }
    const entry: WasenderRequest = {
      to: parsed.to ?? '',
      text: parsed.text ?? '',
      authorization: req.headers.authorization,
      at: Date.now(),
      accepted: false,
    }
    requests.push(entry)
    res.once('close', () => (entry.finishedAt = Date.now()))
    if (req.headers.authorization !== `Bearer ${apiKey}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"success":false,"message":"Unauthenticated"}')
      return
    }
    const behavior = behave(requests.length, entry)
    switch (behavior.kind) {
      case 'accept': {
        if (behavior.delayMs) await new Promise((resolve) => setTimeout(resolve, behavior.delayMs))
        entry.accepted = true
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ success: true, data: { msgId: nextId++, jid: entry.to, status: 'in_progress' } }))
        return
      }
      case 'status':
        if (behavior.delayMs) await new Promise((resolve) => setTimeout(resolve, behavior.delayMs))
        res
          .writeHead(behavior.status, { 'content-type': 'application/json', ...behavior.headers })
          .end(JSON.stringify(behavior.body ?? { success: false, message: 'fake failure' }))
        return
      case 'accept-then-hang':
        entry.accepted = true
        hanging.add(res)
        return
      case 'hang':
        hanging.add(res)
        return
      case 'reset':
        req.socket.destroy()
        return
      case 'garbage':
        res.writeHead(200, { 'content-type': 'application/json' }).end('<html>maintenance</html>')
        return
    }
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    /** Messages the provider took on: what a person would receive. */
    accepted: () => requests.filter((request) => request.accepted),
    behave(next: typeof behave) {
      behave = next
    },
    async stop() {
      for (const res of hanging) res.destroy()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
