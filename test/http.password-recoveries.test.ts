import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { expect } from 'chai'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { freePort } from '../src/db/embedded.ts'
import { createKnex } from '../src/db/knex.ts'
import { createApp } from '../src/http/app.ts'
import { capturingLogger, testKeys } from './support/helpers.ts'
import { checkedFetch } from './support/api-check.ts'

/** Request handling that never reaches a healthy database: validation and unavailability. */
describe('HTTP contract of POST /password-recoveries', () => {
  let server: Server
  let url: string
  let db: Knex
  const logs = capturingLogger()

  before(async () => {
    // Nothing listens on this port: every query fails the way a database outage does.
    db = createKnex(`postgres://nobody:nothing@127.0.0.1:${await freePort()}/none`, { applicationName: 'test', max: 1 })
    const keys = testKeys()
    const app = createApp({
      db,
      logger: logs.logger,
      challenges: {
        boss: {} as PgBoss,
        outboxKey: keys.outboxKey,
        codeHashKey: keys.codeHashKey,
        challengeTtlSeconds: 600,
        clock: () => new Date(),
        logger: logs.logger,
        channels: new Set(['email']),
      },
      invitations: {
        boss: {} as PgBoss,
        outboxKey: keys.outboxKey,
        codeHashKey: keys.codeHashKey,
        invitationTtlSeconds: 3_600,
        clock: () => new Date(),
      },
      clientLimitPerMinute: 1_000,
      metrics: { openWithoutToken: true },
    })
    server = await new Promise((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening))
    })
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  after(async () => {
    await new Promise((resolve) => server.close(resolve))
    await db.destroy()
  })

  const post = (body: string, contentType = 'application/json') =>
    checkedFetch(`${url}/password-recoveries`, { method: 'POST', headers: { 'content-type': contentType }, body })

  async function expectProblem(response: Response, status: number, code: string) {
    expect(response.status).to.equal(status)
    expect(response.headers.get('content-type')).to.match(/^application\/problem\+json/)
    const problem = (await response.json()) as { status: number; code: string; title: string }
    expect(problem).to.include({ status, code })
    return problem
  }

  it('answers malformed JSON with 400 malformed_json', async () => {
    await expectProblem(await post('{"identifier": '), 400, 'malformed_json')
  })

  it('answers an unknown field or a wrong type with 422 invalid_request, naming the field', async () => {
    const problem = (await expectProblem(
      await post(JSON.stringify({ identifier: 'a@b.co', admin: true })),
      422,
      'invalid_request',
    )) as unknown as { errors: unknown[] }
    expect(JSON.stringify(problem.errors)).to.include('admin')
    await expectProblem(await post(JSON.stringify({ identifier: 42 })), 422, 'invalid_request')
    await expectProblem(await post(JSON.stringify([])), 422, 'invalid_request')
  })

  it('answers an identifier that is neither email nor E.164 with 422 invalid_identifier', async () => {
    for (const identifier of ['not-an-address', '+12', '5491155554455']) {
      await expectProblem(await post(JSON.stringify({ identifier })), 422, 'invalid_identifier')
    }
  })

  it('answers a body over 16 KiB with 413', async () => {
    await expectProblem(await post(JSON.stringify({ identifier: 'x'.repeat(17 * 1024) })), 413, 'payload_too_large')
  })

  it('answers 503 with Retry-After when the database is unreachable, and readiness says so', async () => {
    const response = await post(JSON.stringify({ identifier: 'someone@example.com' }))
    await expectProblem(response, 503, 'service_unavailable')
    expect(response.headers.get('retry-after')).to.equal('5')
    await expectProblem(await checkedFetch(`${url}/readyz`), 503, 'database_unavailable')
    expect((await checkedFetch(`${url}/healthz`)).status).to.equal(200)
    expect(logs.text()).not.to.include('someone@example.com')
  })

  it('answers an unknown route with a 404 problem', async () => {
    await expectProblem(await checkedFetch(`${url}/nope`), 404, 'not_found')
  })
})
