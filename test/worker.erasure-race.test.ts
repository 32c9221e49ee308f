import { expect } from 'chai'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { erasePersonAsOwner } from '../src/platform/people.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { deliverOne } from './support/run-once.ts'
import { scriptedProvider, stalledProvider } from './support/scripted-provider.ts'

/** docs/privacy.md "An erasure beside a delivery in flight": the worker neither crashes nor brings anything back. */
describe('erasure racing a delivery', () => {
  const f = useOutboxFixture()
  const erase = (email: string) =>
    erasePersonAsOwner(f.db.owner, { codeHashKey: f.keys.codeHashKey, clock: () => f.now }, parseIdentifier(email)!, 'cli:test')

  it('a worker that claimed the job before the erasure records nothing and resurrects no row', async () => {
    const email = uniqueEmail('racing')
    const { messageId } = await f.harness.enqueue(email)
    const job = await f.harness.nextJob()
    const stalled = stalledProvider('ses-accepted-1')
    const delivering = deliverOne(f.harness.deps({ email: stalled.provider }), job)
    await stalled.sending
    expect(await erase(email)).to.have.property('tombstoneId')
    stalled.release()
    await delivering

    expect(await f.rows.message(messageId)).to.equal(undefined)
    expect(await f.rows.attempts(messageId)).to.deep.equal([])
    expect(await f.db.owner('identity.login_identifiers').where({ value: email })).to.have.length(0)
    expect(await f.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: messageId })).to.have.length(0)
  })

  it('a job still queued when the person is erased is gone, and a late fetch of it settles without a send', async () => {
    const email = uniqueEmail('queued')
    const { messageId } = await f.harness.enqueue(email)
    expect(await f.rows.queuedJob(messageId)).to.not.equal(undefined)
    await erase(email)
    expect(await f.rows.queuedJob(messageId)).to.equal(undefined)
    expect(await f.db.owner('pgboss.job').whereRaw("data->>'messageId' = ?", [messageId])).to.have.length(0)

    // A message whose row went some other way, its job left: the claim finds nothing and sends nothing.
    const other = uniqueEmail('other')
    const { messageId: otherId } = await f.harness.enqueue(other)
    const job = await f.harness.nextJob()
    await erase(other)
    const provider = scriptedProvider(() => ({ providerMessageId: 'never' }))
    await deliverOne(f.harness.deps({ email: provider }), job)
    expect(provider.calls).to.have.length(0)
    expect(await f.rows.message(otherId)).to.equal(undefined)
  })
})
