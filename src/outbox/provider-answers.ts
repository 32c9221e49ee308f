import { TRANSIENT_FAILURES, type Channel } from './constants.ts'
import type { Outcome } from './outcomes.ts'

/** What one record transaction heard from one provider, as far as its breaker cares. */
export type ProviderAnswers = {
  provider: string
  channel: Channel
  /** Provider-side failures: UNAVAILABLE / INDETERMINATE answers that were not about one recipient. */
  failures: number
  /** A probe's answer proved it is there (a success, a REJECTED, an answer about its recipient). */
  probeAnswered: boolean
  /** A probe failed on the provider's side. */
  probeFailed: boolean
  /** It refused us (FailureEffect `provider_misconfigured`): held down at once, whatever else it answered. */
  misconfigured: boolean
}

/**
 * What each provider answered in one record transaction, for its breaker (src/outbox/provider-health.ts):
 * provider-side failures (which make the record step read the provider's window), what its probes
 * proved, and whether it refused our own settings. A THROTTLED answer (its pause handles it) and a
 * worker's own error say nothing about it; outcomes without a provider (a dead letter before any
 * send) are left out. Publications that were no probe never reach the breaker: successes cost it
 * nothing (the window reads them from the attempt rows when a failure asks).
 */
export function answersOf(entries: readonly { outcome: Outcome; channel: Channel }[]): ProviderAnswers[] {
  const byProvider = new Map<string, ProviderAnswers>()
  for (const { outcome, channel } of entries) {
    const sent = outcome.kind === 'deferred' ? outcome.misconfigured : outcome.kind === 'dead_letter' ? undefined : outcome.provider
    if (!sent) continue
    const answers = byProvider.get(sent.id) ?? {
      provider: sent.id,
      // The provider's own channel (a phone message may have gone by SMS); the message's for an outcome without one.
      channel: sent.channel ?? channel,
      failures: 0,
      probeAnswered: false,
      probeFailed: false,
      misconfigured: false,
    }
    byProvider.set(sent.id, answers)
    if (outcome.kind === 'dead_letter') continue
    if (outcome.kind === 'deferred') {
      // A deferral names a provider only when it refused our own settings.
      answers.misconfigured = true
      answers.probeFailed ||= sent.probe
    } else if (outcome.kind === 'published' || outcome.failureClass === 'REJECTED' || outcome.recipientOnly === true) {
      answers.probeAnswered ||= sent.probe
    } else if (TRANSIENT_FAILURES.has(outcome.failureClass)) {
      answers.failures += 1
      answers.probeFailed ||= sent.probe
    }
  }
  return [...byProvider.values()].filter(
    (answers) => answers.failures > 0 || answers.probeAnswered || answers.probeFailed || answers.misconfigured,
  )
}
