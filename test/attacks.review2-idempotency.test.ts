import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { courierKit } from './support/courier-kit.ts'
import { insertFailedDeadLetter } from './support/dead-letters.ts'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const inMinutes = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString()
const uniqueCode = () => `C${randomBytes(6).toString('hex').toUpperCase()}`

/**
 * Idempotency-Key under attack (docs/api.md "Idempotency-Key"): the same key at the same instant,
 * the same key from another caller, the key's spelling. A table lock held by the test makes both
 * requests of a race reach the key's row at the same moment, so the race is run, not hoped for.
 */
describe('attack: Idempotency-Key races and spellings (review2)', () => {
  const f = useWebStack({ worker: false })
  const kit = courierKit(f)
  const message = (destination: string, code = uniqueCode()) => ({
    purpose: 'verification_code',
    channel: 'email',
    destination,
    secret: { code },
    expiresAt: inMinutes(10),
  })
  const messagesTo = async (destination: string) =>
    Number((await f.db.owner('outbox.security_outbox_messages').where({ destination }).count({ n: '*' }))[0]!.n)

  /** Runs `requests` together, all held at the idempotency table until each waits for it, then released at once. */
  async function raced<T>(requests: (() => Promise<T>)[]): Promise<T[]> {
    const gate = await f.db.owner.transaction()
    await gate.raw('LOCK TABLE platform.idempotency_keys IN SHARE ROW EXCLUSIVE MODE')
    const running = requests.map((request) => request())
    try {
      await eventually(async () => {
        const { rows } = await f.db.owner.raw<{ rows: { n: number }[] }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%idempotency_keys%'`,
        )
        return rows[0]!.n >= requests.length ? true : undefined
      }, 'every request to wait at the idempotency table')
    } finally {
      await gate.commit()
    }
    return await Promise.all(running)
  }

  it('runs exactly one of two identical first requests that arrive together; the other gets its answer replayed', async () => {
    const { key } = await kit.apiKey()
    const destination = uniqueEmail('race-same')
    const body = message(destination)
    const answers = await raced([() => kit.send(key, body, 'race-1'), () => kit.send(key, body, 'race-1')])
    expect(answers.map((answer) => answer.status)).to.deep.equal([202, 202])
    expect(answers[0]!.body!.messageId).to.equal(answers[1]!.body!.messageId)
    expect(answers.map((answer) => answer.headers.get('idempotent-replayed')).sort()).to.deep.equal(['true', null].sort())
    expect(await messagesTo(destination)).to.equal(1)
  })

  it('refuses the second of two different requests under one key that arrive together, and sends only the first', async () => {
    const { key } = await kit.apiKey()
    const destination = uniqueEmail('race-other')
    const answers = await raced([() => kit.send(key, message(destination), 'race-2'), () => kit.send(key, message(destination), 'race-2')])
    expect(answers.map((answer) => [answer.status, answer.body?.code ?? null]).sort()).to.deep.equal(
      [
        [202, null],
        [422, 'idempotency_key_reused'],
      ].sort(),
    )
    expect(await messagesTo(destination)).to.equal(1)
  })

  it('keeps a key to its caller: another API key with the same Idempotency-Key is neither replayed the first answer nor refused', async () => {
    const staff = await kit.staff()
    const [first, second] = [await kit.apiKey({}, staff), await kit.apiKey({}, staff)]
    const destination = uniqueEmail('two-callers')
    const body = message(destination)
    const answers = await raced([() => kit.send(first.key, body, 'shared-key'), () => kit.send(second.key, body, 'shared-key')])
    expect(answers.map((answer) => answer.status)).to.deep.equal([202, 202])
    expect(answers[0]!.body!.messageId).not.to.equal(answers[1]!.body!.messageId)
    expect(answers.map((answer) => answer.headers.get('idempotent-replayed'))).to.deep.equal([null, null])
    // And the second caller cannot read the first caller's message through its own key.
    const seen = await f.stack.call('GET', `/v1/messages/${String(answers[0]!.body!.messageId)}`, undefined, {
      authorization: `Bearer ${second.key}`,
    })
    expect(seen.status).to.equal(404)
  })

  it('takes the header name in any case, a key’s value case-sensitively, and refuses two keys in one request', async () => {
    const { key } = await kit.apiKey()
    const destination = uniqueEmail('spelling')
    const body = message(destination)
    const headers = (idempotency: Record<string, string>) => ({ authorization: `Bearer ${key}`, ...idempotency })
    const first = await f.stack.call('POST', '/v1/messages', body, headers({ 'IDEMPOTENCY-KEY': 'Order-7' }))
    const again = await f.stack.call('POST', '/v1/messages', body, headers({ 'idempotency-key': 'Order-7' }))
    expect([first.status, again.status, again.headers.get('idempotent-replayed')]).to.deep.equal([202, 202, 'true'])
    expect(again.body!.messageId).to.equal(first.body!.messageId)
    // Another spelling of the value is another key (the draft's keys are opaque): the caller asked for a second send.
    const other = await f.stack.call('POST', '/v1/messages', body, headers({ 'idempotency-key': 'order-7' }))
    expect([other.status, other.headers.get('idempotent-replayed')]).to.deep.equal([202, null])
    // Two Idempotency-Key headers arrive joined ("a, b"): no key, refused, nothing written.
    const twice = new Headers({ authorization: `Bearer ${key}`, 'content-type': 'application/json' })
    twice.append('idempotency-key', 'Order-8')
    twice.append('idempotency-key', 'Order-9')
    const both = await fetch(`${f.stack.web.url}/v1/messages`, { method: 'POST', headers: twice, body: JSON.stringify(body) })
    expect([both.status, ((await both.json()) as { code: string }).code]).to.deep.equal([400, 'idempotency_key_required'])
    expect(await messagesTo(destination)).to.equal(2)
  })

  it('reissues a dead letter once for two identical staff requests that arrive together', async () => {
    const staff = await kit.staff()
    const dead = await insertFailedDeadLetter(f.db.owner, { destination: uniqueEmail('race-reissue'), failures: ['UNAVAILABLE'] })
    const reissue = () =>
      f.stack.call('POST', `/platform-admin/security-outbox/dead-letters/${dead.messageId}/reissues`, undefined, {
        ...staff.headers,
        'idempotency-key': 'reissue-race',
      })
    const answers = await raced([reissue, reissue])
    expect(answers[0]!.status).to.be.within(200, 299)
    expect(answers[1]!.status).to.equal(answers[0]!.status)
    expect(answers[0]!.body).to.deep.equal(answers[1]!.body)
    expect(answers.map((answer) => answer.headers.get('idempotent-replayed')).sort()).to.deep.equal(['true', null].sort())
    expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId })).to.have.length(2)
  })
})
