import type { FailureClass } from '../outbox/constants.ts'

/**
 * What a failure does beyond its class (docs/delivery.md "Phone channels"):
 * - `channel_unreachable`: this channel cannot reach this recipient (a number without WhatsApp);
 *   the message goes on at once to the deployment's next phone channel, never to a dead letter
 *   while one is left (with none left it is the REJECTED it is classified as);
 * - `provider_misconfigured`: the provider refused *us* (an expired token, a missing template):
 *   no attempt is spent, the provider is held down fleet-wide at once and a MISCONFIGURATION line
 *   is logged; the message waits, or fails over, like any held message.
 */
export type FailureEffect = 'channel_unreachable' | 'provider_misconfigured'

/** What a failed send does to its message: all the record step reads of a provider's refusal. */
export type FaultOutcome = {
  failureClass: FailureClass
  effect: FailureEffect | null
  /** About this recipient alone: never counted against the provider, never a pause of it. */
  recipientOnly: boolean
}

type FaultRow = FaultOutcome & { what: string; then: string }

/**
 * The one fault table (docs/delivery.md "Fault table" is generated from it): every way a provider
 * fails a send is one of these rows, and each row has one outcome. A provider's own codes are
 * mapped to a row in its folder (`src/providers/<name>/faults.ts`), never given an outcome of their
 * own; test/providers.conformance.test.ts holds every provider to `FAULT_CASES` below.
 */
export const FAULTS = Object.freeze({
  recipient_refused: {
    failureClass: 'REJECTED',
    effect: null,
    recipientOnly: true,
    what: 'the provider refuses this recipient for good: a bad address or number, one that opted out',
    then: 'dead-lettered `provider_rejected` at once (the message’s own fate); proves the provider is there',
  },
  recipient_unreachable: {
    failureClass: 'REJECTED',
    effect: 'channel_unreachable',
    recipientOnly: true,
    what: 'this channel cannot reach this number (no WhatsApp on it)',
    then: 'the same code goes on at once over the next phone channel; with none left, dead-lettered `provider_rejected`',
  },
  recipient_deferred: {
    failureClass: 'UNAVAILABLE',
    effect: null,
    recipientOnly: true,
    what: 'the provider refuses this recipient for now (a busy or full mailbox, a domain it cannot check now)',
    then: 'retried on the schedule; never counted against the provider, never pauses it',
  },
  recipient_throttled: {
    failureClass: 'THROTTLED',
    effect: null,
    recipientOnly: true,
    what: 'a rate limit on this one recipient (too many messages to the same number)',
    then: 'retried no earlier than the provider’s `Retry-After`; never pauses the provider for anyone else',
  },
  request_refused: {
    failureClass: 'REJECTED',
    effect: null,
    recipientOnly: false,
    what: 'the provider refuses this request as it is: malformed, too large, content it will not carry',
    then: 'dead-lettered `provider_rejected` at once: sending the same message again cannot succeed',
  },
  provider_misconfigured: {
    failureClass: 'UNAVAILABLE',
    effect: 'provider_misconfigured',
    recipientOnly: false,
    what: 'the provider refuses *us*: credentials (401, 403), an account, sender, configuration set, phone number or template it does not know, a suspended account',
    then: 'no attempt spent: the provider is held down at once fleet-wide, `MISCONFIGURATION` is logged and `sealpost_provider_misconfigured_total` counted; the message fails over to the channel’s next provider, or waits for the probe',
  },
  throttled: {
    failureClass: 'THROTTLED',
    effect: null,
    recipientOnly: false,
    what: 'the provider’s rate limit (429), with or without a `Retry-After`',
    then: 'retried no earlier than the `Retry-After` (seconds or HTTP date, capped at `MAX_PROVIDER_PAUSE_SECONDS`), and the provider is paused for every worker until then',
  },
  unavailable: {
    failureClass: 'UNAVAILABLE',
    effect: null,
    recipientOnly: false,
    what: 'the provider failed before it could act: 500, 502, 503, a refused connection, a timeout before the request reached it',
    then: 'retried on the schedule (the next attempt on the channel’s next provider); counts toward the breaker’s failure rate',
  },
  indeterminate: {
    failureClass: 'INDETERMINATE',
    effect: null,
    recipientOnly: false,
    what: 'the provider may have acted: a timeout or reset after the request was written, 504, a success answer that cannot be read',
    then: 'retried on the schedule (at-least-once: a duplicate code is possible); counts toward the breaker’s failure rate',
  },
} as const satisfies Record<string, FaultRow>)

export type Fault = keyof typeof FAULTS

type FaultCase = {
  answer: string
  fault: Fault
  /** The provider's retry hint the outcome keeps, where its protocol carries one (SMTP carries none). */
  hint?: 'seconds' | 'date'
  /** Only some providers can give this answer: the others name none for it. */
  only?: true
}

/**
 * The answers every provider is held to, each with its one row of `FAULTS`. Each provider says in
 * its `faults.ts` what its own answer is for each (`FAULT_ANSWERS`: SMTP's natural reply, Meta's
 * code…); the conformance test makes its fake give exactly that and checks the outcome.
 */
export const FAULT_CASES = Object.freeze({
  malformed: { answer: '400: a malformed request', fault: 'request_refused' },
  unauthorized: { answer: '401: our credentials are refused', fault: 'provider_misconfigured' },
  forbidden: { answer: '403: our account may not send this', fault: 'provider_misconfigured' },
  not_found: { answer: '404: a resource we name does not exist', fault: 'provider_misconfigured' },
  too_large: { answer: '413: the request is too large', fault: 'request_refused' },
  throttled: { answer: '429 without `Retry-After`', fault: 'throttled' },
  throttled_seconds: { answer: '429 with `Retry-After` in seconds', fault: 'throttled', hint: 'seconds' },
  throttled_date: { answer: '429 with `Retry-After` as an HTTP date', fault: 'throttled', hint: 'date' },
  server_error: { answer: '500', fault: 'unavailable' },
  bad_gateway: { answer: '502', fault: 'unavailable' },
  unavailable: { answer: '503', fault: 'unavailable' },
  gateway_timeout: { answer: '504', fault: 'indeterminate' },
  refused: { answer: 'connection refused', fault: 'unavailable' },
  timeout_before: { answer: 'a timeout before the request reached the provider', fault: 'unavailable' },
  timeout_after: { answer: 'a timeout after the provider accepted (the ambiguous case)', fault: 'indeterminate' },
  reset: { answer: 'a connection reset after the request was written', fault: 'indeterminate' },
  recipient_refused: { answer: 'a per-recipient refusal (bad address or number, opted out)', fault: 'recipient_refused' },
  not_on_channel: { answer: 'a number this channel cannot reach', fault: 'recipient_unreachable', only: true },
  unreadable_success: { answer: 'a success answer that cannot be read', fault: 'indeterminate' },
} as const satisfies Record<string, FaultCase>)

export type FaultCaseId = keyof typeof FAULT_CASES

/** A provider's own answer to each case, as its folder's `faults.ts` declares it (a case marked `only` may be left out). */
export type FaultAnswers = { readonly [K in FaultCaseId]: (typeof FAULT_CASES)[K] extends { only: true } ? string | undefined : string }
