import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export type SesFault = { status: number; errorType: string; headers?: Record<string, string> } | 'forward' | 'hang'

/**
 * An SES v2 endpoint in front of the emulator that answers with SES-shaped errors on demand
 * (status + `x-amzn-ErrorType`, the way the real service does) and forwards everything else.
 */
export async function startFaultySes(emulatorUrl: string) {
  let fault: (call: number) => SesFault = () => 'forward'
  let calls = 0
  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const decided = fault(++calls)
    if (decided === 'hang') return
    if (decided === 'forward') {
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(([name]) => !['host', 'content-length', 'connection'].includes(name)),
      ) as Record<string, string>
      const upstream = await fetch(`${emulatorUrl}${req.url}`, {
        method: req.method,
        headers,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      })
      res
        .writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' })
        .end(Buffer.from(await upstream.arrayBuffer()))
      return
    }
    res
      .writeHead(decided.status, { 'content-type': 'application/json', 'x-amzn-ErrorType': decided.errorType, ...decided.headers })
      .end(JSON.stringify({ message: `fake ${decided.errorType}` }))
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
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
