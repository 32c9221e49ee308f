import { expect } from 'chai'
import { claimRequestOf } from '../jobs/delivery-deps.ts'
import { deliverOne } from './support/run-once.ts'
import { leaseClaimableMessages } from '../src/outbox/claim-sql.ts'
import { suppressedAmong } from '../src/outbox/delivery-events-sql.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

describe('suppressed destinations at the claim', () => {
  const f = useOutboxFixture()
  const { suppress, expectDeadLetteredUnsent } = f.rows

  it('the common-case claim statement itself says which claimed destinations are suppressed', async () => {
    const { messageId: blocked } = await f.harness.enqueue(uniqueEmail('blocked'))
    const { messageId: open } = await f.harness.enqueue(uniqueEmail('open'))
    await suppress(blocked)
    const jobs = [await f.harness.nextJob(), await f.harness.nextJob()]
    const rows = await leaseClaimableMessages(f.harness.worker, jobs.map(claimRequestOf), f.now)
    expect(Object.fromEntries(rows.map((row) => [row.id, row.suppressed]))).to.deep.equal({ [blocked]: true, [open]: false })
  })

  it('dead-letters a code to a suppressed destination without a send (the common-case claim)', async () => {
    const { messageId } = await f.harness.enqueue(uniqueEmail('bounced'))
    await suppress(messageId)
    const provider = scriptedProvider((call) => ({ providerMessageId: `p-${call}` }))
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    expect(provider.calls).to.have.length(0)
    await expectDeadLetteredUnsent(messageId, 'destination_suppressed')
  })

  it('a complaint does not stop a recovery code to that address: the claim statement and the fallback check agree', async () => {
    const { messageId: complained } = await f.harness.enqueue(uniqueEmail('complained'))
    const { messageId: bounced } = await f.harness.enqueue(uniqueEmail('bounced'))
    await suppress(complained, 'complaint')
    await suppress(bounced, 'permanent_bounce')
    expect([...(await suppressedAmong(f.harness.worker, [complained, bounced]))]).to.deep.equal([bounced])
    const jobs = [await f.harness.nextJob(), await f.harness.nextJob()]
    const rows = await leaseClaimableMessages(f.harness.worker, jobs.map(claimRequestOf), f.now)
    expect(Object.fromEntries(rows.map((row) => [row.id, row.suppressed]))).to.deep.equal({ [complained]: false, [bounced]: true })
  })
})
