import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { gzipSync } from 'node:zlib'
import { expect } from 'chai'
import { loadConfig } from '../src/providers/config.ts'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

/** One POST from a given loopback address (127.0.0.2, 127.0.0.3…): a distinct client as the kernel sees it. */
async function postFrom(localAddress: string, base: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const url = new URL(path, base)
  const payload = JSON.stringify(body)
  return await new Promise<{ status: number; headers: IncomingHttpHeaders }>((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        localAddress,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...headers },
      },
      (res) => {
        res.resume()
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }))
      },
    )
    req.on('error', reject)
    req.end(payload)
  })
}

/**
 * A router hop as Heroku's behaves: it forwards every request to the web and appends the address
 * it was connected from to X-Forwarded-For (keeping whatever the client sent before it).
 */
async function startRouter(upstream: string): Promise<{ url: string; stop: () => Promise<void> }> {
  const target = new URL(upstream)
  const server: Server = createServer((req, res) => {
    const forwarded = [req.headers['x-forwarded-for'], req.socket.remoteAddress].filter(Boolean).join(', ')
    const outgoing = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host, 'x-forwarded-for': forwarded },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      },
    )
    outgoing.on('error', () => res.writeHead(502).end())
    req.pipe(outgoing)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async stop() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

const recovery = () => ({ identifier: uniqueEmail('proxied') })

describe('TRUST_PROXY configuration', () => {
  it('reads false, true, a hop count and a list of addresses and ranges, and refuses anything else by name', () => {
    expect(loadConfig({}, 'web').TRUST_PROXY).to.equal(false)
    expect(loadConfig({ TRUST_PROXY: '1' }, 'web').TRUST_PROXY).to.equal(1)
    expect(loadConfig({ TRUST_PROXY: 'true' }, 'web').TRUST_PROXY).to.equal(true)
    expect(loadConfig({ TRUST_PROXY: 'false' }, 'web').TRUST_PROXY).to.equal(false)
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 192.168.1.7,loopback, fd00::/8' }, 'web').TRUST_PROXY).to.deep.equal([
      '10.0.0.0/8',
      '192.168.1.7',
      'loopback',
      'fd00::/8',
    ])
    for (const bad of ['yes', '10.0.0.0/33', 'example.com', '1.2.3', '-1']) {
      expect(() => loadConfig({ TRUST_PROXY: bad }, 'web'), bad).to.throw(/TRUST_PROXY/)
    }
  })
})

describe('per-client limit behind a router (TRUST_PROXY=1)', () => {
  const f = useWebStack({ worker: false, clientLimitPerMinute: 3, trustProxy: 1 })
  let router: Awaited<ReturnType<typeof startRouter>>
  before(async () => {
    router = await startRouter(f.stack.web.url)
  })
  after(async () => {
    await router?.stop()
  })

  it('gives two clients reaching the web through the same router hop buckets of their own', async () => {
    const first: number[] = []
    for (let i = 0; i < 4; i++) first.push((await postFrom('127.0.0.2', router.url, '/password-recoveries', recovery())).status)
    expect(first).to.deep.equal([202, 202, 202, 429])
    // On main every request arrived from the router's one address: this one shared the exhausted bucket.
    const second = await postFrom('127.0.0.3', router.url, '/password-recoveries', recovery())
    expect(second.status).to.equal(202)
  })

  it('does not let a client escape its bucket by sending its own X-Forwarded-For through the router', async () => {
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) {
      statuses.push(
        (await postFrom('127.0.0.4', router.url, '/password-recoveries', recovery(), { 'x-forwarded-for': `203.0.113.${i + 1}` })).status,
      )
    }
    expect(statuses).to.deep.equal([202, 202, 202, 429])
  })
})

describe('per-client limit with TRUST_PROXY off', () => {
  const f = useWebStack({ worker: false, clientLimitPerMinute: 3 })

  it('counts a client that resets its connection right after a compressed body as itself, not as nobody', async () => {
    // The body is inflated off the main thread: the reset lands first, and Node then forgets the peer's address.
    const { port } = new URL(f.stack.web.url)
    const hits = async () => Number((await f.db.owner.raw('SELECT count(*) AS n FROM platform.rate_limit_hits')).rows[0].n)
    const before = await hits()
    for (let i = 0; i < 3; i++) {
      const body = gzipSync(JSON.stringify({ identifier: uniqueEmail('reset') }))
      const socket = connect({ port: Number(port), host: '127.0.0.1', localAddress: '127.0.0.8' })
      socket.on('error', () => undefined)
      await new Promise<void>((resolve) => socket.once('connect', resolve))
      // The reset once the server has read the whole body, its inflation still under way.
      const reset = new Promise<void>((resolve) =>
        f.stack.web.server.once('request', (req: IncomingMessage) =>
          req.once('end', () => {
            socket.resetAndDestroy()
            resolve()
          }),
        ),
      )
      socket.write(
        `POST /password-recoveries HTTP/1.1\r\nHost: web\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: ${body.length}\r\n\r\n`,
      )
      socket.write(body)
      await reset
    }
    // Each was served: its client hit and its destination's are written (wherever the client's was counted).
    await eventually(async () => ((await hits()) >= before + 6 ? true : undefined), 'the reset requests served')
    expect((await postFrom('127.0.0.8', f.stack.web.url, '/password-recoveries', recovery())).status).to.equal(429)
  })

  it('ignores a forged X-Forwarded-For: rotating it does not buy a client more requests', async () => {
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) {
      statuses.push(
        (await postFrom('127.0.0.5', f.stack.web.url, '/password-recoveries', recovery(), { 'x-forwarded-for': `198.51.100.${i + 1}` }))
          .status,
      )
    }
    expect(statuses).to.deep.equal([202, 202, 202, 429])
  })
})

describe('per-client limit for IPv6 clients (TRUST_PROXY=1: the router reports the address)', () => {
  const f = useWebStack({ worker: false, clientLimitPerMinute: 3, trustProxy: 1 })
  const from = (address: string) =>
    postFrom('127.0.0.6', f.stack.web.url, '/password-recoveries', recovery(), { 'x-forwarded-for': address })
  /** The statuses of one request from each address, in order. */
  const statusesFrom = async (addresses: readonly string[]) => {
    const statuses: number[] = []
    for (const address of addresses) statuses.push((await from(address)).status)
    return statuses
  }

  it('counts a client that takes a new address of its own network for every request as one client', async () => {
    // A subscriber's IPv6 network is a /64 at least: every address in it is the holder's to use.
    const statuses = await statusesFrom([
      '2001:db8:7:1::1',
      '2001:db8:7:1::2',
      '2001:db8:7:1:8a2e:370:7334:1',
      '2001:db8:7:1:ffff::9',
      '2001:db8:7:1::abcd',
    ])
    expect(statuses).to.deep.equal([202, 202, 202, 429, 429])
    // The neighbouring /64 is another subscriber's (a carrier numbers its devices from one pool): not held back.
    expect((await from('2001:db8:7:2::1')).status).to.equal(202)
  })

  it('counts an IPv4 client reported as an IPv4-mapped IPv6 address as that IPv4 client, and spelling does not matter', async () => {
    expect(await statusesFrom(['198.51.100.7', '::ffff:198.51.100.7', '::FFFF:c633:6407', '198.51.100.7'])).to.deep.equal([
      202, 202, 202, 429,
    ])
    expect(
      await statusesFrom(['2001:0DB8:0009:0000:0000:0000:0000:0001', '2001:db8:9::2', '2001:db8:9:0::3', '2001:db8:9::4']),
    ).to.deep.equal([202, 202, 202, 429])
  })

  it('drops the port a router writes after the address, or every new connection would be a client of its own', async () => {
    expect(await statusesFrom([40001, 40002, 40003, 40004].map((port) => `198.51.100.9:${port}`))).to.deep.equal([202, 202, 202, 429])
    expect(await statusesFrom(['[2001:db8:50::1]:40001', '[2001:db8:50::2]:40002', '[2001:db8:50::3]', '2001:db8:50::4'])).to.deep.equal([
      202, 202, 202, 429,
    ])
  })

  it('counts IPv4 clients that reach it through a NAT64 translator or a Teredo relay each as its IPv4 address, not as one /64', async () => {
    // Each IPv4 client behind the translator shows up in 64:ff9b::/96: as a /64 they would all share one bucket.
    expect(await statusesFrom([21, 22, 23, 24].map((n) => `64:ff9b::198.51.100.${n}`))).to.deep.equal([202, 202, 202, 202])
    // …and each is the same client as when it arrives over IPv4: its bucket holds the request above.
    expect(await statusesFrom(Array(3).fill('198.51.100.21'))).to.deep.equal([202, 202, 429])
    // Teredo: 2001:0:<relay>:<flags>:<port>:<client IPv4, inverted>; four clients of one relay (198.51.100.30–33).
    const teredo = ['39cc:9be1', '39cc:9be0', '39cc:9bdf', '39cc:9bde'].map((inverted) => `2001:0:4136:e378:8000:63bf:${inverted}`)
    expect(await statusesFrom(teredo)).to.deep.equal([202, 202, 202, 202])
    expect((await from('198.51.100.30')).status).to.equal(202)
  })

  it('counts an address it cannot read by its text and says so once, without the text', async () => {
    expect(await statusesFrom(Array(4).fill('client-chosen-text'))).to.deep.equal([202, 202, 202, 429])
    await from('other-client-chosen-text')
    // Text spelling a network's key is not that network: its bucket is the text's own.
    expect(await statusesFrom([...Array(3).fill('2001:db8:66:1:0:0:0:0/64'), '2001:db8:66:1::1'])).to.deep.equal([202, 202, 202, 202])
    const warnings = f.logs
      .text()
      .split('\n')
      .filter((line) => line.includes('the client address is not an IP address'))
    expect(warnings).to.have.length(1)
    expect(f.logs.text()).not.to.include('client-chosen-text')
  })
})
