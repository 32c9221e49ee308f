import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * One answer of the faulty endpoint: an SES-shaped error (status, `x-amzn-ErrorType` and the error's
 * `message` when given), `forward` to the emulator, `forward-then-hang` (the emulator took the
 * message, the answer never comes), `hang`, `reset` (the socket dies once the request is read) or
 * `garbage` (a 200 that is no JSON).
 */
export type SesFault =
  | { status: number; errorType?: string; headers?: Record<string, string>; message?: string }
  | 'forward'
  | 'forward-then-hang'
  | 'hang'
  | 'reset'
  | 'garbage'

/**
 * An SES v2 endpoint in front of the emulator that answers with SES-shaped errors on demand
 * (status + `x-amzn-ErrorType`, the way the real service does) and forwards everything else.
 */
export async function startFaultySes(emulatorUrl: string) {
  let fault: (call: number) => SesFault = () => 'forward'
  let calls = 0
  const hanging = new Set<ServerResponse>()
  const forward = async (req: IncomingMessage, body: Buffer[]) => {
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(([name]) => !['host', 'content-length', 'connection'].includes(name)),
    ) as Record<string, string>
    return await fetch(`${emulatorUrl}${req.url}`, { method: req.method, headers, body: body.length ? Buffer.concat(body) : undefined })
  }
  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const decided = fault(++calls)
    if (decided === 'hang') return void hanging.add(res)
    if (decided === 'reset') return void req.socket.destroy()
    if (decided === 'garbage') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>maintenance</html>')
    if (decided === 'forward' || decided === 'forward-then-hang') {
      const upstream = await forward(req, chunks)
      const body = Buffer.from(await upstream.arrayBuffer())
      if (decided === 'forward-then-hang') return void hanging.add(res)
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' }).end(body)
      return
    }
    res
      .writeHead(decided.status, {
        'content-type': 'application/json',
        ...(decided.errorType ? { 'x-amzn-ErrorType': decided.errorType } : {}),
        ...decided.headers,
      })
      .end(JSON.stringify({ message: decided.message ?? `fake ${decided.errorType ?? decided.status}` }))
  }
  // A failed forward (the emulator gone mid-test) answers 502 instead of an unhandled rejection.
  const server: Server = createServer((req, res) => {
    answer(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(502)
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls: () => calls,
    fail(next: typeof fault) {
      fault = next
    },
    async stop() {
      for (const res of hanging) res.destroy()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
