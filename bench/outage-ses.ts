import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** How the proxy answers while it is in that mode: forward to the emulator, 503 as SES does, or never. */
export type SesMode = 'forward' | 'unavailable' | 'hang'

/** One request that reached "SES", on the bench's clock, with the recipient it named. */
export type SesCall = { at: number; destination: string; answer: 'accepted' | 'refused' | 'unavailable' | 'hung' }

/**
 * An SES v2 endpoint in front of the emulator, like test/support/faulty-ses.ts, that also records
 * every request's arrival time and recipient: the outage benchmark needs when each code reached
 * the provider and how many calls reached it while it was held down, and reads neither from the
 * emulator (whose store keeps whole seconds).
 */
export async function startOutageSes(emulatorUrl: string) {
  let mode: SesMode = 'forward'
  const calls: SesCall[] = []
  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks)
    const call: SesCall = { at: Date.now(), destination: destinationOf(body), answer: 'hung' }
    calls.push(call)
    if (mode === 'hang') return
    if (mode === 'unavailable') {
      call.answer = 'unavailable'
      res
        .writeHead(503, { 'content-type': 'application/json', 'x-amzn-ErrorType': 'ServiceUnavailableException' })
        .end(JSON.stringify({ message: 'fake ServiceUnavailableException' }))
      return
    }
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(([name]) => !['host', 'content-length', 'connection'].includes(name)),
    ) as Record<string, string>
    const upstream = await fetch(`${emulatorUrl}${req.url}`, { method: req.method, headers, body: body.length ? body : undefined })
    call.answer = upstream.ok ? 'accepted' : 'refused'
    res
      .writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' })
      .end(Buffer.from(await upstream.arrayBuffer()))
  }
  const server: Server = createServer((req, res) => {
    answer(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(502)
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    setMode(next: SesMode) {
      mode = next
    },
    async stop() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** The first recipient of an SES v2 SendEmail body (`Destination.ToAddresses`), or '' when unreadable. */
function destinationOf(body: Buffer): string {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { Destination?: { ToAddresses?: string[] } }
    return parsed.Destination?.ToAddresses?.[0] ?? ''
  } catch {
    return ''
  }
}
