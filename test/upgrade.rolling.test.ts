import { expect } from 'chai'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'
import { installPreviousRelease, PREVIOUS_RELEASE } from './support/previous-release.ts'
import { inbox, eventually } from './support/helpers.ts'
import {
  emptyDatabase,
  rollingDeployment,
  type Outside,
  type RollingDeployment,
  type UpgradeDatabase,
} from './support/rolling-deployment.ts'

/**
 * A deploy runs the new release step while the previous release's web and worker serve, starts the
 * new processes beside them, then stops the old ones (docs/upgrading.md). Under steady sign-up and
 * recovery traffic, every code answered 202 must reach the provider exactly once, nothing may be
 * dead-lettered, no answer may be 5xx, and a code issued by one version must confirm on the other.
 * A rollback runs the same overlap the other way. Real processes from both trees against one database.
 */
describe(`a rolling upgrade from the previous release (${PREVIOUS_RELEASE.version}) under traffic`, function () {
  this.timeout(300_000)
  let outside: Outside
  let stopFakes: () => Promise<void>

  before(async function () {
    this.timeout(300_000)
    const previous = await installPreviousRelease()
    const emulator = await startSesEmulator(0)
    const wasender = await startFakeWasender('upgrade-key')
    outside = { previous, sesUrl: emulator.url, wasenderUrl: wasender.url, wasenderKey: 'upgrade-key' }
    stopFakes = async () => {
      await wasender.stop()
      await emulator.stop()
    }
  })
  after(async () => {
    await stopFakes?.()
  })

  it('delivers every accepted code exactly once, dead-letters nothing, answers no 5xx, and confirms codes across versions', async () => {
    const db = await emptyDatabase()
    const deploy = rollingDeployment(outside, db)
    try {
      await deploy.release('previous')
      const oldWorker = await deploy.start('previous')
      const traffic = deploy.traffic(4)
      await deploy.until(4, 'previous')

      await deploy.release('current')
      await deploy.start('current')
      await deploy.until(8, 'current')
      // The overlap lasts until codes crossed both ways, however slow the machine.
      await deploy.untilCrossConfirmed('sign-up previous')
      await deploy.untilCrossConfirmed('sign-up current')
      await deploy.stop('previous', oldWorker)
      await deploy.until(4, 'current')
      await deploy.stopTraffic(traffic)

      await proveNothingLost(deploy, db, outside.sesUrl)
    } finally {
      await deploy.close()
      await db.drop()
    }
  })

  it('rolls back without a loss: the previous release started on the upgraded database (without its release step, which refuses it) takes over from this one', async () => {
    const db = await emptyDatabase()
    const deploy = rollingDeployment(outside, db)
    try {
      await deploy.release('previous')
      const oldWorker = await deploy.start('previous')
      const traffic = deploy.traffic(4)
      await deploy.until(4, 'previous')
      await deploy.release('current')
      const newWorker = await deploy.start('current')
      await deploy.stop('previous', oldWorker)
      await deploy.until(4, 'current')

      // The rollback: the previous release's migrator finds migrations it does not have (docs/upgrading.md "Rolling back").
      const refused = await deploy.releaseStep('previous')
      expect(refused.code, 'the previous release step on the upgraded database').to.not.equal(0)
      expect(refused.output).to.include('The migration directory is corrupt')
      await deploy.start('previous')
      await deploy.until(4, 'previous')
      await deploy.untilCrossConfirmed('sign-up previous')
      await deploy.untilCrossConfirmed('sign-up current')
      await deploy.stop('current', newWorker)
      await deploy.until(4, 'previous')
      await deploy.stopTraffic(traffic)

      await proveNothingLost(deploy, db, outside.sesUrl)
    } finally {
      await deploy.close()
      await db.drop()
    }
  })
})

/**
 * After the traffic stopped: every message settled, every code answered 202 reached the provider
 * exactly once, nothing dead-lettered, no 5xx, codes confirmed across versions both ways, nothing
 * left sealed.
 */
async function proveNothingLost(deploy: RollingDeployment, db: UpgradeDatabase, sesUrl: string): Promise<void> {
  await eventually(
    async () =>
      (await db.owner('outbox.security_outbox_messages').whereNotIn('state', ['published', 'dead_lettered']).count({ n: '*' }))[0]?.n ===
        0 || undefined,
    'every message settled',
    60_000,
  )
  const { accepted, statuses, crossConfirmed, lost } = deploy
  const deadLetters: { reason: string }[] = await db.owner('outbox.security_outbox_dead_letters').select('reason')
  // A web that failed an enqueue behind its 202 or refused it by a limit logs `<flow> not enqueued`.
  const hidden = deploy.outputs().flatMap((text) => text.split('\n').filter((line) => line.includes('not enqueued')))
  expect(hidden, 'enqueues a web hid behind a 202').to.deep.equal([])
  expect(lost, `codes accepted but never delivered (dead letters: ${deadLetters.map((row) => row.reason).join(', ')})`).to.deep.equal([])
  for (const to of new Set(accepted.map((entry) => entry.to))) {
    const emails = await inbox(sesUrl, to)
    expect(emails, `emails to one person`).to.have.length(accepted.filter((entry) => entry.to === to).length)
  }
  expect(await deploy.upgradeDeadLetters(), 'dead letters').to.deep.equal([])
  expect(statuses.filter(({ status }) => status >= 500)).to.deep.equal([])
  for (const version of ['previous', 'current'] as const)
    expect(accepted.filter((entry) => entry.by === version).length, `codes the ${version} web accepted`).to.be.greaterThan(0)
  expect(
    crossConfirmed.filter((entry) => entry.startsWith('sign-up previous')).length,
    'old codes confirmed by the new web',
  ).to.be.greaterThan(0)
  expect(
    crossConfirmed.filter((entry) => entry.startsWith('sign-up current')).length,
    'new codes confirmed by the old web',
  ).to.be.greaterThan(0)
  const envelopes: { envelope: string }[] = await db.owner('outbox.security_outbox_ciphertexts').select('envelope')
  expect(envelopes, 'nothing left sealed').to.deep.equal([])
}
