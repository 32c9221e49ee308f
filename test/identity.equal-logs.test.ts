import { expect } from 'chai'
import { requestPasswordRecovery } from '../src/identity/password-recovery.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail } from './support/helpers.ts'
import { openWebSide, webChallengeDeps, type WebSide } from './support/web-side.ts'

/**
 * Found by review: the log lines a password-recovery request writes must not depend on whether the
 * identifier has an account (docs/architecture.md §7: no side effect tells them apart). Before 3492b47 the rehearsed issue of an unknown identifier went
 * through `enqueueSecurityMessageTx` and logged `message enqueued` like the real one.
 */
describe('log lines of a password recovery, known or unknown', () => {
  let side: WebSide
  const keys = testKeys()
  const sideLogs = capturingLogger()

  before(async () => {
    side = await openWebSide(sideLogs.logger)
  })
  after(() => side.close())

  async function linesOf(email: string): Promise<string[]> {
    const logs = capturingLogger()
    await requestPasswordRecovery(side.api, webChallengeDeps(side.boss, keys, logs.logger), { kind: 'email', value: email })
    // winston writes through a stream: let it drain
    for (let tick = 0; tick < 10; tick++) await new Promise((resolve) => setImmediate(resolve))
    return logs
      .text()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { level: string; message: string })
      .map((line) => `${line.level} ${line.message}`)
  }

  it('writes the same log lines for a known and an unknown identifier', async () => {
    const known = uniqueEmail('known')
    await createVerifiedIdentity(side.db.owner, known)
    const forKnown = await linesOf(known)
    const forUnknown = await linesOf(uniqueEmail('unknown'))
    expect(forKnown, 'the real issue is logged').to.include('info message enqueued')
    expect(forUnknown, 'a log reader cannot tell the unknown identifier apart').to.deep.equal(forKnown)
  })
})
