import { expect } from 'chai'
import { describeError } from '../src/logging/logger.ts'
import { FAULT_CASES, FAULTS, type FaultCaseId } from '../src/providers/faults.ts'
import { DeliveryFailureError } from '../src/providers/provider.ts'
import { PROVIDERS } from '../src/providers/registry.ts'
import type { ConformanceFixture, RunningFixture } from './support/conformance/fixture.ts'
import { sesFixture } from './support/conformance/ses.ts'
import { smtpFixture } from './support/conformance/smtp.ts'
import { twilioFixture } from './support/conformance/twilio.ts'
import { wasenderFixture } from './support/conformance/wasender.ts'
import { whatsAppCloudFixture } from './support/conformance/whatsapp-cloud.ts'

/** Every provider, each through its real fake: the same table for all of them (River's driver suite, Oban's engines). */
const FIXTURES: readonly ConformanceFixture[] = [sesFixture, smtpFixture, wasenderFixture, whatsAppCloudFixture, twilioFixture]

const CASES = Object.entries(FAULT_CASES) as [FaultCaseId, (typeof FAULT_CASES)[FaultCaseId]][]

/** What a send that failed came to; throws when it did not fail as a classified provider failure. */
async function failureOf(send: Promise<unknown>, secrets: readonly string[]): Promise<DeliveryFailureError> {
  const error = await send.then(
    () => new Error('the send was accepted'),
    (caught: unknown) => caught,
  )
  expect(error, String(error)).to.be.instanceOf(DeliveryFailureError)
  // A failure is logged and may be shown: it never carries the destination or the message text.
  for (const shown of [(error as Error).message, JSON.stringify(describeError(error))])
    for (const secret of secrets) expect(shown).not.to.include(secret)
  return error as DeliveryFailureError
}

describe('the fault table, held to every provider (src/providers/faults.ts)', () => {
  it('runs against every provider of the registry', () => {
    expect(FIXTURES.map((fixture) => fixture.id)).to.deep.equal(PROVIDERS.map((provider) => provider.id))
  })

  it('has each provider name its own answer to every case (only a case marked `only` may be left out)', () => {
    for (const provider of PROVIDERS)
      for (const [id, definition] of CASES)
        if (!('only' in definition)) expect(provider.faultAnswers[id], `${provider.id}: ${id}`).to.be.a('string').and.not.equal('')
  })

  for (const fixture of FIXTURES) {
    const answers = PROVIDERS.find((provider) => provider.id === fixture.id)!.faultAnswers
    describe(`${fixture.id}, through its fake`, () => {
      let running: RunningFixture
      before(async () => {
        running = await fixture.start()
      })
      after(async () => {
        await running.stop()
      })

      for (const [id, definition] of CASES) {
        const answer = answers[id]
        if (answer === undefined) continue
        const hint = 'hint' in definition && fixture.hints ? definition.hint : undefined
        it(`${definition.answer} → ${definition.fault} (${answer})`, async () => {
          const { provider, message, timeoutMs, hintAt } = await running.arrange(id)
          const failure = await failureOf(provider.dispatch(message, AbortSignal.timeout(timeoutMs)), [message.destination, message.text])
          const { failureClass, effect, recipientOnly } = FAULTS[definition.fault]
          expect({ failureClass: failure.failureClass, effect: failure.effect, recipientOnly: failure.recipientOnly }).to.deep.equal({
            failureClass,
            effect,
            recipientOnly,
          })
          expect(failure.fault, 'the row the connector named').to.equal(definition.fault)
          if (hint === undefined) expect(failure.retryAfterAt).to.equal(null)
          else {
            expect(hintAt, 'the fixture names the hint it gave').to.be.instanceOf(Date)
            expect(failure.retryAfterAt?.getTime()).to.be.closeTo(hintAt!.getTime(), hint === 'date' ? 0 : 2_000)
          }
        })
      }
    })
  }
})
