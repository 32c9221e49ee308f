import { expect } from 'chai'
import { createBoss, installQueues } from '../src/db/boss.ts'
import { useProcessFixture } from './support/process-fixture.ts'

describe("one lease truth: the worker reads the queue's lease", () => {
  const f = useProcessFixture()

  async function releaseWithLease(leaseSeconds: number) {
    const owner = createBoss(f.db.ownerUrl, 'release', f.logs.logger)
    await owner.start()
    await installQueues(owner, { LEASE_SECONDS: leaseSeconds })
    await owner.stop({ graceful: false })
  }

  it("refuses to start when the queue's expireInSeconds is below 2 × SEND_TIMEOUT_MS + 5 s, whatever its own LEASE_SECONDS says", async function () {
    this.timeout(60_000)
    await releaseWithLease(60)
    const refused = f.worker({ SEND_TIMEOUT_MS: '30000', LEASE_SECONDS: '300' })
    expect(await refused.exited, refused.output()).to.equal(1)
    expect(refused.output()).to.include(
      'leases a job for 60 s (expireInSeconds), below 2 × SEND_TIMEOUT_MS + 5 s = 65 s for SEND_TIMEOUT_MS=30000',
    )
    expect(refused.output()).to.include('run the release step with LEASE_SECONDS of at least 65')
  })

  it('starts once the release step has applied a long enough lease, and logs the lease it found', async function () {
    this.timeout(60_000)
    await releaseWithLease(65)
    const worker = f.worker({ SEND_TIMEOUT_MS: '30000' })
    const [line] = await worker.waitFor(/^.*"message":"worker started".*$/m, 'the worker to start')
    expect(line).to.include('"leaseSeconds":65')
    worker.child.kill('SIGTERM')
    expect(await worker.exited).to.equal(0)
  })
})
