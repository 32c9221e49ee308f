import { expect } from 'chai'
import { createBoss } from '../src/db/boss.ts'
import { freePort } from '../src/db/embedded.ts'
import { createKnex } from '../src/db/knex.ts'
import { DatabaseUnavailableError, isDatabaseUnavailable, waitForDatabase } from '../src/db/unavailable.ts'
import { capturingLogger } from './support/helpers.ts'
import { testCluster } from './support/root-hooks.ts'

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code })

describe('isDatabaseUnavailable', () => {
  const unavailable: [string, unknown][] = [
    ['57P01 admin_shutdown', withCode('57P01', 'terminating connection due to administrator command')],
    ['57P02 crash_shutdown', withCode('57P02')],
    ['57P03 cannot_connect_now', withCode('57P03', 'the database system is starting up')],
    ['08006 connection_failure', withCode('08006')],
    ['08001 unable to connect', withCode('08001')],
    ['53300 too_many_connections', withCode('53300')],
    ['ECONNREFUSED', withCode('ECONNREFUSED')],
    ['ECONNRESET', withCode('ECONNRESET')],
    ['ETIMEDOUT', withCode('ETIMEDOUT')],
    ['an AggregateError of refused attempts (IPv6 and IPv4)', new AggregateError([withCode('ECONNREFUSED'), withCode('ECONNREFUSED')], '')],
    ['Connection terminated unexpectedly', new Error('Connection terminated unexpectedly')],
    ['a knex query error on a dead client', new Error('COMMIT; - Client has encountered a connection error and is not queryable')],
    [
      'a knex pool acquire timeout',
      Object.assign(new Error('Knex: Timeout acquiring a connection. The pool is probably full.'), { name: 'KnexTimeoutError' }),
    ],
    ['pg connect timeout', new Error('timeout expired')],
    ['an error wrapping one as its cause', new Error('start failed', { cause: withCode('57P01') })],
    ['pg-boss’s spread copy of an error', { ...withCode('ECONNREFUSED'), message: 'connect ECONNREFUSED', queue: 'security-outbox' }],
  ]
  for (const [what, error] of unavailable) {
    it(`is true for ${what}`, () => expect(isDatabaseUnavailable(error)).to.equal(true))
  }
  const available: [string, unknown][] = [
    ['a unique violation', withCode('23505')],
    ['a permission refusal', withCode('42501')],
    ['a wrong password', withCode('28P01')],
    ['a missing database', withCode('3D000')],
    ['a plain bug', new TypeError('cannot read properties of undefined')],
    ['nothing', undefined],
    ['a string', 'ECONNREFUSED'],
  ]
  for (const [what, error] of available) {
    it(`is false for ${what}`, () => expect(isDatabaseUnavailable(error)).to.equal(false))
  }
})

describe('waiting for the database at startup', () => {
  it('retries a refused connection with growing delays, logs each wait, and gives up at the bound naming the variable', async () => {
    const logs = capturingLogger()
    const db = createKnex(`postgres://nobody:secret-password@127.0.0.1:${await freePort()}/none`, { applicationName: 'wait-test', max: 1 })
    let clock = 0
    const delays: number[] = []
    try {
      const failure = await waitForDatabase(db, {
        variable: 'WORKER_DATABASE_URL',
        timeoutSeconds: 10,
        logger: logs.logger,
        now: () => clock,
        sleep: async (ms) => {
          delays.push(ms)
          clock += ms
        },
      }).then(
        () => undefined,
        (error: unknown) => error,
      )
      expect(failure).to.be.instanceOf(DatabaseUnavailableError)
      expect((failure as Error).message)
        .to.include('WORKER_DATABASE_URL')
        .and.not.include('secret-password')
    } finally {
      await db.destroy()
    }
    expect(delays).to.deep.equal([500, 1_000, 2_000, 4_000])
    expect(logs.text().match(/"message":"waiting for the database"/g)).to.have.length(4)
    expect(logs.text()).to.include('"errorCode":"ECONNREFUSED"').and.not.include('secret-password')
  })

  it('stops at once on a failure that waiting cannot fix (a wrong password)', async () => {
    const url = new URL(testCluster().ownerUrl('postgres'))
    url.password = 'not-the-password'
    const db = createKnex(url.toString(), { applicationName: 'wait-test', max: 1 })
    let slept = 0
    try {
      const failure = await waitForDatabase(db, {
        variable: 'API_DATABASE_URL',
        timeoutSeconds: 60,
        logger: capturingLogger().logger,
        sleep: async () => void slept++,
      }).catch((error: unknown) => error)
      expect((failure as { code?: string }).code).to.equal('28P01')
    } finally {
      await db.destroy()
    }
    expect(slept).to.equal(0)
  })
})

describe('pg-boss warnings', () => {
  it('are logged with pg-boss’s text, without the error text or data they carry', async () => {
    const logs = capturingLogger()
    const boss = createBoss('postgres://unused@127.0.0.1:1/none', 'worker', logs.logger)
    boss.emit('warning', {
      message: 'Failed to start LISTEN/NOTIFY listener: password authentication failed for user "x"',
      data: { type: 'listen_notify_unavailable', error: 'password authentication failed for user "x"', sql: 'SELECT secret' },
    })
    expect(logs.text())
      .to.include('"message":"pg-boss warning"')
      .and.include('listen_notify_unavailable')
      .and.include('Failed to start LISTEN/NOTIFY listener')
    expect(logs.text()).not.to.include('password authentication failed').and.not.include('SELECT secret')
  })
})
