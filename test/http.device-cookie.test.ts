import { expect } from 'chai'
import express from 'express'
import type { AddressInfo } from 'node:net'
import { deviceTokenOf, setDeviceCookie } from '../src/http/device-cookie.ts'

describe('the device cookie', () => {
  /** Serves one request through `handler` on a real server and answers its Set-Cookie and body. */
  async function serve(handler: express.RequestHandler, headers: Record<string, string> = {}) {
    const app = express().get('/', handler)
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { headers })
      return { cookies: response.headers.getSetCookie(), body: await response.text() }
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  }
  const now = new Date('2026-12-02T00:00:00Z')
  const device = { token: 'A'.repeat(43), expiresAt: new Date(now.getTime() + 90 * 86_400_000) }

  it('is HttpOnly, SameSite=Strict, path / and, where the client reaches us over HTTPS, Secure', async () => {
    const secure = await serve((_req, res) => {
      setDeviceCookie(res, device, true, now)
      res.end()
    })
    expect(secure.cookies).to.have.length(1)
    expect(secure.cookies[0]).to.match(
      /^sealpost_device=A{43}; Max-Age=7776000; Path=\/; Expires=[^;]+; HttpOnly; Secure; SameSite=Strict$/,
    )
    const plain = await serve((_req, res) => {
      setDeviceCookie(res, device, false, now)
      res.end()
    })
    expect(plain.cookies[0]).not.to.include('Secure')
  })

  it('reads the token back from a Cookie header among others, and ignores a malformed one', async () => {
    const read = (cookie: string) => serve((req, res) => void res.send(deviceTokenOf(req) ?? 'none'), { cookie })
    expect((await read(`theme=dark; sealpost_device=${'b'.repeat(43)}; other=1`)).body).to.equal('b'.repeat(43))
    expect((await read('sealpost_device=short')).body).to.equal('none')
    expect((await read(`sealpost_device=${'x'.repeat(40)}%00`)).body).to.equal('none')
    expect((await read('sealpost_devicex=' + 'b'.repeat(43))).body).to.equal('none')
  })
})
