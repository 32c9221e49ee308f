import { expect } from 'chai'
import { claimRequestOf } from '../jobs/delivery-deps.ts'
import { claimMessages } from '../src/outbox/claim.ts'
import { leaseClaimableMessages } from '../src/outbox/claim-sql.ts'
import { deadLetterMessagesTx } from '../src/outbox/messages-sql.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'

const at = (base: Date, seconds: number) => new Date(base.getTime() + seconds * 1000)

/**
 * The claim's rules are read twice: by the one-statement common case (claim-sql.ts), which may
 * only lease, and by the full path (claim.ts), which decides everything else. The common case
 * must never lease what the full path refuses: each refusal is put to both.
 */
describe('the claim’s rules, in its one statement and in its full path alike', () => {
  const f = useOutboxFixture()

  const refusals: [string, (messageId: string) => Promise<unknown>, string][] = [
    [
      'an expired code',
      (id) =>
        f.db
          .owner('outbox.security_outbox_messages')
          .where({ id })
          .update({ expires_at: at(f.now, -1) }),
      'expired',
    ],
    [
      'a paused channel',
      () => f.db.owner('outbox.provider_pauses').insert({ channel: 'email', paused_until: at(f.now, 60) }),
      'channel_paused',
    ],
    ['a lost ciphertext', (id) => f.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: id }).del(), 'no_ciphertext'],
    [
      'a final message',
      (id) =>
        f.harness.worker.transaction((trx) =>
          deadLetterMessagesTx(trx, [{ messageId: id, reason: 'challenge_consumed', lastFailureClass: null }], f.now),
        ),
      'final',
    ],
  ]

  for (const [situation, arrange, why] of refusals) {
    it(`neither leases ${situation}: the full path settles it (${why})`, async () => {
      const { messageId } = await f.harness.enqueue(uniqueEmail())
      const request = claimRequestOf(await f.harness.nextJob())
      await arrange(messageId)
      expect(await leaseClaimableMessages(f.harness.worker, [request], f.now), 'leased by the one statement').to.deep.equal([])
      const [claim] = await claimMessages(f.harness.worker, f.harness.workerBoss, [request], f.now)
      expect(claim).to.include({ kind: 'settled', why })
    })
  }

  it('both lease a pending, unexpired code on an unpaused channel with its ciphertext', async () => {
    const { messageId } = await f.harness.enqueue(uniqueEmail())
    const request = claimRequestOf(await f.harness.nextJob())
    const [claim] = await claimMessages(f.harness.worker, f.harness.workerBoss, [request], f.now)
    expect(claim).to.include({ kind: 'claimed' })
    expect((claim as { message: { id: string } }).message.id).to.equal(messageId)
    const { messageId: other } = await f.harness.enqueue(uniqueEmail())
    const leased = await leaseClaimableMessages(f.harness.worker, [claimRequestOf(await f.harness.nextJob())], f.now)
    expect(leased.map((row) => row.id)).to.deep.equal([other])
  })
})
