import { expect } from 'chai'
import type { Knex } from 'knex'
import { createKnex } from '../src/db/knex.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'
import { createVerifiedIdentity, eventually, testKeys, uniqueEmail } from './support/helpers.ts'
import { startOwnCluster, type OwnCluster } from './support/own-cluster.ts'
import { procfileCommand, productionEnvironment, spawnCollecting, type Spawned, stopAll } from './support/processes.ts'

// A lease just above the floor for a 1 s send timeout: jobs a restart left active come back in seconds.
const LEASE_SECONDS = 7

describe('a PostgreSQL restart under traffic (a cluster of this file’s own)', () => {
  let cluster: OwnCluster
  let owner: Knex
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let wasender: Awaited<ReturnType<typeof startFakeWasender>>
  const keys = testKeys()
  const spawned: Spawned[] = []
  const env = () =>
    productionEnvironment({
      apiUrl: cluster.apiUrl,
      workerUrl: cluster.workerUrl,
      keys,
      sesEndpoint: emulator.url,
      wasenderUrl: wasender.url,
      wasenderKey: 'outage-key',
      extra: {
        SEND_TIMEOUT_MS: '1000',
        LEASE_SECONDS: String(LEASE_SECONDS),
        CLIENT_RATE_LIMIT_PER_MINUTE: '100000',
        INVITATION_LINK_BASE_URL: 'https://app.sealpost.test',
      },
    })
  const spawnProcess = (type: 'web' | 'worker') => {
    const child = spawnCollecting('sh', ['-c', procfileCommand(type)], { env: env() })
    spawned.push(child)
    return child
  }
  let web: Spawned
  let webUrl: string
  let worker: Spawned
  const people: string[] = []

  before(async function () {
    this.timeout(120_000)
    cluster = await startOwnCluster({ leaseSeconds: LEASE_SECONDS })
    owner = createKnex(cluster.ownerUrl, { applicationName: 'outage-test-owner', max: 2 })
    emulator = await startSesEmulator(0)
    wasender = await startFakeWasender('outage-key')
    for (let i = 0; i < 600; i++) people.push(uniqueEmail(`outage${i}`))
    for (const email of people) await createVerifiedIdentity(owner, email)
    web = spawnProcess('web')
    worker = spawnProcess('worker')
    webUrl = (await web.waitFor(/"url":"(http:\/\/[^"]+)"/, 'the web to listen'))[1]!
    await worker.waitFor(/"message":"worker started"/, 'the worker to start')
  })
  after(async function () {
    this.timeout(60_000)
    await stopAll(spawned)
    await owner?.destroy()
    await wasender?.stop()
    await emulator?.stop()
    await cluster?.stop()
  })

  const allFinal = async () => {
    const rows: { state: string; n: string }[] = await owner('outbox.security_outbox_messages')
      .select('state')
      .count({ n: '*' })
      .groupBy('state')
    const counts = Object.fromEntries(rows.map((row) => [row.state, Number(row.n)]))
    return (counts.pending ?? 0) + (counts.leased ?? 0) === 0 ? counts : undefined
  }

  it('answers 503 with Retry-After (never 500) while the database restarts, keeps the worker running, and loses no message', async function () {
    this.timeout(120_000)
    const workerPid = worker.child.pid
    const answers: { status: number; retryAfter: string | null }[] = []
    let next = 0
    let running = true
    const traffic = Promise.all(
      Array.from({ length: 8 }, async () => {
        while (running && next < people.length) {
          const identifier = people[next++]!
          const response = await fetch(`${webUrl}/password-recoveries`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ identifier }),
          })
          await response.arrayBuffer()
          answers.push({ status: response.status, retryAfter: response.headers.get('retry-after') })
          // a signed-in route and readiness too: every kind of request meets the outage
          const probe = await fetch(`${webUrl}/step-ups`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: 'Bearer not-a-token' },
            body: '{}',
          })
          await probe.arrayBuffer()
          answers.push({ status: probe.status, retryAfter: probe.headers.get('retry-after') })
        }
      }),
    )
    await eventually(async () => (answers.filter((answer) => answer.status === 202).length >= 20 ? true : undefined), 'traffic to flow')
    await cluster.server.stop()
    await new Promise((resolve) => setTimeout(resolve, 300))
    await cluster.server.start()
    const atRestart = answers.length
    await eventually(
      async () => (answers.slice(atRestart).filter((answer) => answer.status === 202).length >= 20 ? true : undefined),
      'traffic to flow again after the restart',
      30_000,
    )
    running = false
    await traffic

    const statuses = [...new Set(answers.map((answer) => answer.status))].sort()
    expect(
      answers.filter((answer) => answer.status >= 500 && answer.status !== 503),
      `statuses seen: ${statuses.join(', ')}`,
    ).to.deep.equal([])
    const unavailable = answers.filter((answer) => answer.status === 503)
    expect(unavailable.length, 'the restart was seen by some requests').to.be.greaterThan(0)
    for (const answer of unavailable) expect(Number(answer.retryAfter)).to.be.greaterThan(0)

    expect(worker.child.exitCode).to.equal(null)
    expect(worker.child.pid).to.equal(workerPid)
    const accepted = answers.filter((answer) => answer.status === 202).length
    const counts = await eventually(allFinal, 'every message to reach a final state', 60_000)
    expect(counts.published ?? 0, JSON.stringify(counts)).to.be.at.least(accepted)
    expect(counts.dead_lettered ?? 0, JSON.stringify(counts)).to.equal(0)
    expect(web.output()).not.to.include('unhandled request error')
    expect(web.output() + worker.output()).not.to.match(/startup failed|uncaught|unhandled rejection/i)
  })

  it('lets a worker and a web started while the database is down wait for it, then serve and deliver', async function () {
    this.timeout(120_000)
    await cluster.server.stop()
    const late = spawnProcess('worker')
    const lateWeb = spawnProcess('web')
    await late.waitFor(/"message":"waiting for the database"/, 'the late worker to wait')
    await lateWeb.waitFor(/"message":"waiting for the database"/, 'the late web to wait')
    // web, while down: a plain 503 with Retry-After
    const down = await fetch(`${webUrl}/password-recoveries`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: people[people.length - 1] }),
    })
    expect(down.status).to.equal(503)
    expect(down.headers.get('retry-after')).to.match(/^\d+$/)
    await cluster.server.start()
    await late.waitFor(/"message":"worker started"/, 'the late worker to start once the database is back', 60_000)
    expect(late.output()).to.include('"message":"database reachable"')
    const lateUrl = (await lateWeb.waitFor(/"url":"(http:\/\/[^"]+)"/, 'the late web to listen once the database is back', 60_000))[1]!
    expect((await fetch(`${lateUrl}/readyz`)).status).to.equal(200)

    worker.child.kill('SIGSTOP')
    try {
      const email = uniqueEmail('late')
      await createVerifiedIdentity(owner, email)
      const response = await fetch(`${webUrl}/password-recoveries`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: email }),
      })
      expect(response.status).to.equal(202)
      await eventually(
        async () => {
          const message = await owner('outbox.security_outbox_messages').where({ destination: email }).first()
          return message?.state === 'published' ? true : undefined
        },
        'the late worker to deliver',
        30_000,
      )
    } finally {
      worker.child.kill('SIGCONT')
    }
    expect(worker.child.exitCode).to.equal(null)
    expect(late.child.exitCode).to.equal(null)
    expect(lateWeb.child.exitCode).to.equal(null)
  })
})
