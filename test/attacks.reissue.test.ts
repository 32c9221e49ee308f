import { expect } from 'chai'
import type { Knex } from 'knex'
import { createKnex } from '../src/db/knex.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { changeStaff } from '../src/platform/staff.ts'
import {
  createElevatedSession,
  createVerifiedIdentity,
  editMessageBypassingTrigger,
  eventually,
  inbox,
  uniqueEmail,
} from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const BASE = '/platform-admin/security-outbox'

/**
 * Whoever holds the worker's database login points a pending code at their own
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
    const worker = await f.startWorker()
    try {
      await eventually(
        async () => {
          const row = await f.db.owner('outbox.security_outbox_messages').where({ id: messageId }).first()
          return states.includes(row.state) ? true : undefined
        },
        `the message to be ${states.join(' or ')}`,
      )
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

  /** A victim's pending recovery code, through the real route. */
  async function pendingRecovery() {
    const victim = uniqueEmail('victim')
    await createVerifiedIdentity(f.db.owner, victim)
    expect((await f.stack.call('POST', '/password-recoveries', { identifier: victim })).status).to.equal(202)
    const message = await f.db.owner('outbox.security_outbox_messages').where({ destination: victim }).first()
    return { victim, messageId: message.id as string, challengeId: message.challenge_id as string }
  }
  /** What a refused reissue must leave alone: the challenge's code, the outbox, the audit trail. */
  async function untouched(challengeId: string) {
    const challenge = await f.db.owner('identity.challenges').where({ id: challengeId }).first('code_hash', 'last_sent_at')
    const messages = await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: challengeId }).select('id')
    const audits = await f.db.owner('platform.audit_records').where({ action: 'security_outbox.dead_letter_reissued' }).count('*')
    return { challenge, messages, audits }
  }

  it('refuses (409 reissue_destination_mismatch) a dead letter the owner pointed elsewhere, logs it as a security event without the address, and seals nothing', async () => {
    const { messageId, challengeId } = await pendingRecovery()
    const attacker = uniqueEmail('attacker')
    // As a restored backup or a hand edit with the trigger off could leave it, then dead-lettered for a reason staff may reissue.
    await editMessageBypassingTrigger(f.db.owner, messageId, { destination: attacker })
    await f.db.owner.transaction(async (trx) => {
      await trx('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).delete()
      await trx('outbox.security_outbox_messages').where({ id: messageId }).update({ state: 'dead_lettered', dead_lettered_at: new Date() })
      await trx('outbox.security_outbox_dead_letters').insert({
        message_id: messageId,
        reason: 'retries_exhausted',
        last_failure_class: 'UNAVAILABLE',
      })
    })
    const before = await untouched(challengeId)

    const answer = await f.stack.call('POST', `${BASE}/dead-letters/${messageId}/reissues`, undefined, await staffHeaders('mismatch'))

    expect(answer.status).to.equal(409)
    expect(answer.body).to.include({ code: 'reissue_destination_mismatch' })
    expect(await untouched(challengeId), 'no new code, message or audit record').to.deep.equal(before)
    expect(await f.db.owner('outbox.security_outbox_messages').where({ destination: attacker })).to.have.length(1)
    const line = f.logs
      .text()
      .split('\n')
      .find((entry) => entry.includes('SECURITY: reissue refused'))
    expect(line, 'the security log line').to.be.a('string')
    expect(JSON.parse(line!)).to.include({ level: 'error', security: true, messageId, errorCode: 'reissue_destination_mismatch' })
    expect(f.logs.text()).not.to.include(attacker)
  })

  it('never reissues a decryption_failed dead letter (409 reissue_refused_decryption_failed), edited row or lost key alike', async () => {
    // The owner (trigger off) points a pending code elsewhere; the real worker dead-letters it.
    const edited = await pendingRecovery()
    await editMessageBypassingTrigger(f.db.owner, edited.messageId, { destination: uniqueEmail('attacker') })
    await deliverUntil(edited.messageId, ['dead_lettered'])
    // An untouched row whose envelope no longer opens (its key was dropped, say).
    const lost = await pendingRecovery()
    await f.db.owner.transaction(async (trx) => {
      await trx('outbox.security_outbox_ciphertexts').where({ message_id: lost.messageId }).delete()
      await trx('outbox.security_outbox_messages')
        .where({ id: lost.messageId })
        .update({ state: 'dead_lettered', dead_lettered_at: new Date() })
      await trx('outbox.security_outbox_dead_letters').insert({ message_id: lost.messageId, reason: 'decryption_failed' })
    })

    for (const [name, dead] of [
      ['edited', edited],
      ['lost key', lost],
    ] as const) {
      expect(await f.db.owner('outbox.security_outbox_dead_letters').where({ message_id: dead.messageId }).first(), name).to.include({
        reason: 'decryption_failed',
      })
      const before = await untouched(dead.challengeId)
      const answer = await f.stack.call(
        'POST',
        `${BASE}/dead-letters/${dead.messageId}/reissues`,
        undefined,
        await staffHeaders(name.replace(' ', '-')),
      )
      expect(answer.status, name).to.equal(409)
      expect(answer.body, name).to.include({ code: 'reissue_refused_decryption_failed' })
      expect(await untouched(dead.challengeId), name).to.deep.equal(before)
    }
  })
})
