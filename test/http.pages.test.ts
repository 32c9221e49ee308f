import { expect } from 'chai'
import { readFile } from 'node:fs/promises'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import knex from 'knex'
import { apiDocsEnabled, ConfigError } from '../config/schema.ts'
import { loadConfig } from '../src/providers/config.ts'
import { createApp, type WebDeps } from '../src/http/app.ts'
import { fromThisMachine } from '../src/http/phone-inbox-page.ts'
import { createPhoneInbox } from '../src/providers/phone-inbox.ts'
import { capturingLogger } from './support/helpers.ts'

/** The app on a free port, wired to a database it never reaches (the pages touch none). */
async function serve(apiDocs: boolean, extra: Partial<WebDeps> = {}): Promise<{ url: string; close: () => Promise<void> }> {
  const challenges = { boss: {}, outboxKey: Buffer.alloc(32), codeHashKey: Buffer.alloc(32), clock: () => new Date() }
  const app = createApp({
    db: knex({ client: 'pg' }),
    challenges,
    invitations: challenges,
    logger: capturingLogger().logger,
    clientLimitPerMinute: 60,
    apiDocs,
    ...extra,
  } as unknown as WebDeps)
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s))
  })
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

describe('pages: the API reference and the operator console', () => {
  it('serves /docs in development and test, not in staging or production unless API_DOCS=on', () => {
    expect(
      ['development', 'test', 'staging', 'production'].map((NODE_ENV) =>
        apiDocsEnabled(loadConfig({ NODE_ENV, DATABASE_URL: 'postgres://o@db/x' }, 'release')),
      ),
    ).to.deep.equal([true, true, false, false])
    expect(apiDocsEnabled(loadConfig({ NODE_ENV: 'production', API_DOCS: 'on', DATABASE_URL: 'postgres://o@db/x' }, 'release'))).to.equal(
      true,
    )
    expect(apiDocsEnabled(loadConfig({ NODE_ENV: 'development', API_DOCS: 'off' }, 'release'))).to.equal(false)
    expect(() => loadConfig({ API_DOCS: 'yes' }, 'release')).to.throw(ConfigError, 'API_DOCS')
  })

  it('answers /docs with 404 when off, and the Swagger UI page from the local package when on', async () => {
    const off = await serve(false)
    try {
      const answer = await fetch(`${off.url}/docs/`)
      expect(answer.status).to.equal(404)
      expect(await answer.json()).to.include({ code: 'not_found' })
    } finally {
      await off.close()
    }
    const on = await serve(true)
    try {
      const page = await fetch(`${on.url}/docs/`)
      expect(page.status).to.equal(200)
      expect(page.headers.get('content-security-policy')).to.include("default-src 'none'").and.include("script-src 'self'")
      expect(await page.text())
        .to.include('swagger-ui-bundle.js')
        .and.not.match(/https?:\/\//)
      const bundle = await fetch(`${on.url}/docs/swagger-ui-bundle.js`)
      expect(bundle.headers.get('content-type')).to.match(/javascript/)
      expect((await fetch(`${on.url}/docs/oauth2-redirect.html`)).status, 'only the two files the page needs').to.equal(404)
      expect((await fetch(`${on.url}/docs`, { redirect: 'manual' })).headers.get('location')).to.equal('/docs/')
    } finally {
      await on.close()
    }
  })

  it('serves the console with a strict Content-Security-Policy, and its files carry no inline script or style', async () => {
    const app = await serve(false)
    try {
      const page = await fetch(`${app.url}/platform-admin/`)
      expect(page.status).to.equal(200)
      const csp = page.headers.get('content-security-policy')!
      expect(csp.split(/;\s*/)).to.have.members([
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'none'",
        "base-uri 'none'",
      ])
      expect(csp).not.to.include('unsafe')
      expect((await fetch(`${app.url}/platform-admin/console.js`)).headers.get('content-type')).to.match(/javascript/)
    } finally {
      await app.close()
    }
    const html = await readFile(new URL('../public/platform-admin/index.html', import.meta.url), 'utf8')
    expect(html)
      .not.to.match(/<script(?![^>]*\bsrc=)[^>]*>/)
      .and.not.match(/<style|\sstyle=|\son[a-z]+=/i)
    const script = await readFile(new URL('../public/platform-admin/console.js', import.meta.url), 'utf8')
    expect(script, 'server values are written as text, never as HTML').not.to.match(
      /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(/,
    )
    expect(script, 'the token never goes into a cookie').not.to.match(/document\.cookie|localStorage/)
  })

  it('serves a development index (API docs, console, local inbox, /openapi.json) and a /join page that never reads the token; 404 for both otherwise', async () => {
    const dev = await serve(true, { developmentPages: { inboxUrl: 'http://127.0.0.1:8005' } })
    try {
      const index = await fetch(`${dev.url}/`)
      expect(index.status).to.equal(200)
      expect(index.headers.get('content-type')).to.match(/text\/html/)
      expect(index.headers.get('content-security-policy')).to.include("default-src 'none'").and.include("script-src 'self'")
      const html = await index.text()
      for (const link of ['href="/docs/"', 'href="/platform-admin/"', 'href="/openapi.json"', 'href="http://127.0.0.1:8005"'])
        expect(html, link).to.include(link)
      const join = await fetch(`${dev.url}/join?token=echo-me-not`)
      expect(join.status).to.equal(200)
      expect(join.headers.get('content-security-policy')).to.include("default-src 'none'")
      const text = await join.text()
      expect(text).to.include('INVITATION_LINK_BASE_URL').and.include('/invitations/acceptance')
      expect(text, 'the page neither echoes nor reads the token')
        .not.to.include('echo-me-not')
        .and.not.match(/<script/i)
    } finally {
      await dev.close()
    }
    const deployed = await serve(false)
    try {
      for (const path of ['/', '/join']) {
        const answer = await fetch(`${deployed.url}${path}`)
        expect(answer.status, path).to.equal(404)
        expect(await answer.json()).to.include({ code: 'not_found' })
      }
    } finally {
      await deployed.close()
    }
  })

  it('lists the phone inbox newest first, every value escaped, under the strict CSP, and as JSON; 404 in an app without development pages', async () => {
    const phoneInbox = createPhoneInbox()
    const at = new Date('2026-12-01T09:00:00Z')
    phoneInbox.record({ provider: 'twilio', to: '+15555550123', text: 'Sealpost sign-up code: 482913', providerMessageId: 'SM1', at })
    phoneInbox.record({
      provider: 'whatsapp_cloud',
      to: '+4915123456789',
      text: '<script>alert(1)</script> & "Sons" \'x\'',
      providerMessageId: 'wamid.2',
      at: new Date(at.getTime() + 60_000),
    })
    const dev = await serve(false, { developmentPages: { inboxUrl: null, phoneInbox } })
    try {
      const index = await (await fetch(`${dev.url}/`)).text()
      expect(index).to.include('href="/dev/phone-inbox"')
      const page = await fetch(`${dev.url}/dev/phone-inbox`)
      expect(page.status).to.equal(200)
      expect(page.headers.get('content-type')).to.match(/text\/html/)
      expect(page.headers.get('cache-control')).to.equal('no-store')
      expect(page.headers.get('content-security-policy')).to.include("default-src 'none'").and.include("script-src 'self'")
      const html = await page.text()
      expect(html).to.not.include('<script>').and.not.include('"Sons"')
      expect(html).to.include('&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Sons&quot; &#39;x&#39;')
      expect(html.indexOf('+4915123456789'), 'newest first').to.be.below(html.indexOf('+15555550123'))
      expect(html).to.include('twilio').and.include('whatsapp_cloud').and.include('2026-12-01 09:00:00')
      const json = await fetch(`${dev.url}/dev/phone-inbox.json`)
      expect(json.headers.get('content-type')).to.match(/application\/json/)
      expect(await json.json()).to.deep.equal({
        messages: [
          {
            provider: 'whatsapp_cloud',
            to: '+4915123456789',
            text: '<script>alert(1)</script> & "Sons" \'x\'',
            at: '2026-12-01T09:01:00.000Z',
          },
          { provider: 'twilio', to: '+15555550123', text: 'Sealpost sign-up code: 482913', at: '2026-12-01T09:00:00.000Z' },
        ],
      })
    } finally {
      await dev.close()
    }
    const deployed = await serve(false)
    try {
      for (const path of ['/dev/phone-inbox', '/dev/phone-inbox.json']) {
        const answer = await fetch(`${deployed.url}${path}`)
        expect(answer.status, path).to.equal(404)
        expect(await answer.json()).to.include({ code: 'not_found' })
      }
    } finally {
      await deployed.close()
    }
  })

  it('shows the phone inbox, which holds codes in the clear, to this machine only, whatever a forwarded header says', () => {
    const from = (remoteAddress: string) => fromThisMachine({ socket: { remoteAddress } } as never)
    expect(['127.0.0.1', '127.8.0.1', '::1', '::ffff:127.0.0.1'].map(from)).to.deep.equal([true, true, true, true])
    expect(['192.168.1.20', '10.0.0.7', '::ffff:10.0.0.7', 'fe80::1', '127.evil.example', ''].map(from)).to.deep.equal([
      false,
      false,
      false,
      false,
      false,
      false,
    ])
  })
})
