import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** A provider's local HTTP fake (development and tests): where it listens, the answers it holds back, its stop. */
export type FakeHttpServer = {
  url: string
  /** The transport faults every fake plays alike: a hang after taking the message (`take`), a hang before it (never answered until the fake stops), a reset. */
  fault: (kind: TransportFault, req: IncomingMessage, res: ServerResponse, take: () => void) => void
  stop: () => Promise<void>
}

/** A provider that never answers (having taken the message, or not) or drops the connection. */
export type TransportFault = 'accept-then-hang' | 'hang' | 'reset'

/** What a fake does with one request, its body read whole; a handler that throws destroys its response. */
export type FakeHandler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => unknown

/** Waits `ms` before an answer, as a slow provider does. */
export const delay = async (ms: number | undefined): Promise<void> => {
  if (ms) await new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * The server every HTTP provider fake (Wasender, WhatsApp Cloud, Twilio) runs on: 127.0.0.1, `port`
 * or any free one. `stop` drops held answers and open connections before it closes.
 */
export async function startFakeHttp(handle: FakeHandler, port = 0): Promise<FakeHttpServer> {
  const held = new Set<ServerResponse>()
  const read = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    await handle(req, res, Buffer.concat(chunks))
  }
  const server = createServer((req, res) => {
    read(req, res).catch(() => res.destroy())
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    fault: (kind, req, res, take) => {
      if (kind === 'reset') return void req.socket.destroy()
      if (kind === 'accept-then-hang') take()
      held.add(res)
    },
    stop: async () => {
      for (const res of held) res.destroy()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
