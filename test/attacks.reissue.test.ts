import { expect } from 'chai'
import type { Knex } from 'knex'
import { createSesConnector } from '../src/delivery/ses-connector.ts'
import { createKnex } from '../src/db/knex.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { startWorker } from '../src/runtime/worker.ts'
import { createElevatedSession, createVerifiedIdentity, eventually, inbox, uniqueEmail, workerConfig } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const BASE = '/platform-admin/security-outbox'

/**
 * Issue 27 attack 3: whoever holds the worker's database login points a pending code at their own
 * address; the envelope binding dead-letters it (decryption_failed), and one staff click on
 * "reissue" would then seal a fresh, working code for the attacker's address.
 */
describe('attack: a tampered row turns one staff click into a takeover', function () {
  this.timeout(60_000)
  const f = useWebStack({ worker: false })
  let asWorker: Knex
  before(() => {
    asWorker = createKnex(f.db.workerUrl, { applicationName: 'attacker-with-worker-login', max: 1 })
  })
  after(async () => {
    await asWorker?.destroy()
  })

  /** A staff member with a session and a fresh elevation: the headers their console sends. */
  async function staffHeaders(key: string) {
    const email = uniqueEmail('staff')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(email)!, 'test', new Date())).to.equal('granted')
    return { ...(await createElevatedSession(f.db.owner, identityId)), 'idempotency-key': key }
  }

  /** Runs the real worker until `done` holds for the message, then stops it. */
  async function deliverUntil(messageId: string, states: string[]) {
    const worker = await startWorker({
      config: workerConfig(),
      workerUrl: f.db.workerUrl,
      keys: f.keys,
      logger: f.logs.logger,
      providers: [
        createSesConnector({
          region: 'us-east-1',
          fromAddress: 'no-reply@sealpost.test',
          endpoint: f.stack.emulator.url,
          credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
        }),
      ],
    })
    try {
      await eventually(async () => {
        const row = await f.db.owner('outbox.security_outbox_messages').where({ id: messageId }).first()
        return states.includes(row.state) ? true : undefined
      }, `the message to be ${states.join(' or ')}`)
    } finally {
      await worker.stop()
    }
  }

  it('the worker login points a pending recovery code at the attacker, the worker dead-letters it, staff reissue it: nothing is ever sealed for the attacker', async () => {
    const victim = uniqueEmail('victim')
    const attacker = uniqueEmail('attacker')
    await createVerifiedIdentity(f.db.owner, victim)
    expect((await f.stack.call('POST', '/password-recoveries', { identifier: victim })).status).to.equal(202)
    const pending = await f.db.owner('outbox.security_outbox_messages').where({ destination: victim }).first()

    // 1. With nothing but the worker's login: point the pending message at the attacker.
    const edit = await asWorker('outbox.security_outbox_messages')
      .where({ id: pending.id })
      .update({ destination: attacker })
      .then(
        () => undefined,
        (error: { code?: string }) => error,
      )
    // 2. The worker meets the row: the envelope no longer opens (or, the edit refused, it goes to the victim).
    await deliverUntil(pending.id, ['dead_lettered', 'published'])
    // 3. A staff member, asked "my code never came", reissues the dead letter through the console's route.
    const reissue = await f.stack.call('POST', `${BASE}/dead-letters/${pending.id}/reissues`, undefined, await staffHeaders('takeover'))

    const sealedForAttacker = await f.db
      .owner('outbox.security_outbox_messages')
      .where({ destination: attacker })
      .whereNot({ id: pending.id })
      .select('id', 'state')
    expect(sealedForAttacker, 'a fresh code sealed for the attacker').to.deep.equal([])
    expect(reissue.status, 'the reissue').to.be.oneOf([404, 409])
    expect(await inbox(f.stack.emulator.url, attacker), 'nothing reached the attacker').to.deep.equal([])
    expect(edit?.code, "the worker's login may not change a message's destination").to.equal('42501')
  })
})
