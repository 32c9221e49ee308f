import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { expect } from 'chai'
import { loopbackClients } from '../bench/measure.ts'

describe('bench HTTP clients', () => {
  let server: Server
  const seen: string[] = []
  before(async () => {
    server = createServer((req, res) => {
      seen.push(req.socket.remoteAddress ?? '')
      res.end('ok')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  })
  after(async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  it('connect each from a loopback address of its own, as distinct clients behind no proxy would', async () => {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const clients = loopbackClients(url, 252)
    try {
      for (const n of [0, 1, 2, 249, 250, 251]) {
        const response = await clients.pool(n).request({ method: 'GET', path: '/' })
        await response.body.dump()
      }
    } finally {
      await clients.close()
    }
    // Given as `connect.localAddress`, undici's connector replaced the address with the client's own
    // (unset): every connection came from 127.0.0.1, one per-client bucket for the whole bench row.
    expect(seen).to.deep.equal(['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.251', '127.0.1.2', '127.0.1.3'])
  })
})
