/**
 * Names operators grep for. Each frozen list is mirrored by a CHECK constraint in the migrations;
 * a migration is history and spells its lists out itself, so a new name here needs a new migration
 * (test/outbox.invariants.test.ts compares each list with its constraint).
 */
export const MESSAGE_STATES = Object.freeze(['pending', 'leased', 'published', 'dead_lettered'] as const)
export type MessageState = (typeof MESSAGE_STATES)[number]

export const PURPOSES = Object.freeze([
  'sign_up',
  'add_sign_in_method',
  'password_recovery',
  'step_up',
  'invitation',
  'security_notice',
  // The courier API's generic kinds (docs/courier.md): a caller's own code or sign-in link.
  'verification_code',
  'magic_link',
] as const)
export type Purpose = (typeof PURPOSES)[number]
export type ChallengePurpose = Exclude<Purpose, 'invitation' | 'security_notice' | CourierOnlyPurpose>
/** Purposes only the courier API sends: no challenge or invitation of ours stands behind them. */
export type CourierOnlyPurpose = 'verification_code' | 'magic_link'

export const CHANNELS = Object.freeze(['email', 'whatsapp', 'sms'] as const)
export type Channel = (typeof CHANNELS)[number]

/** What an attempt row and `outbox.provider_states` may name as the provider; mirrored by CHECKs. */
export const PROVIDER_IDS = Object.freeze(['ses', 'smtp', 'wasender', 'twilio', 'whatsapp_cloud'] as const)
export type ProviderId = (typeof PROVIDER_IDS)[number]

/** A provider's state as the fleet holds it (`outbox.provider_states.state`); mirrored by a CHECK. */
export const PROVIDER_STATES = Object.freeze(['up', 'down'] as const)
export type ProviderState = (typeof PROVIDER_STATES)[number]

export const ATTEMPT_OUTCOMES = Object.freeze(['published', 'retryable_error', 'failed'] as const)
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number]

export const FAILURE_CLASSES = Object.freeze([
  'REJECTED',
  'THROTTLED',
  'UNAVAILABLE',
  'INDETERMINATE',
  'unexpected_worker_error',
  // No longer produced (a staging/production worker without INVITATION_LINK_BASE_URL does not
  // start); kept because old attempt rows carry it and the CHECK constraint lists it.
  'invitation_link_unconfigured',
] as const)
export type FailureClass = (typeof FAILURE_CLASSES)[number]

/** The failures that say a provider may be down (the outage hold counts them): no answer, or a 5xx-like one. */
export const TRANSIENT_FAILURES: ReadonlySet<FailureClass> = new Set<FailureClass>(['UNAVAILABLE', 'INDETERMINATE'])

export const DEAD_LETTER_REASONS = Object.freeze([
  'provider_rejected',
  'retries_exhausted',
  'challenge_expired',
  'challenge_consumed',
  'decryption_failed',
  'superseded_by_resend',
  'worker_crash_loop',
  'invitation_revoked',
  'invitation_accepted',
  'invitation_expired',
  'destination_suppressed',
] as const)
export type DeadLetterReason = (typeof DEAD_LETTER_REASONS)[number]

/** Envelope versions the ciphertext CHECK accepts (20261201000350_envelope_v2): v2 names its key. */
export const ENVELOPE_VERSIONS = Object.freeze(['v1', 'v2'] as const)
/** What a provider told us after it accepted a message (docs/delivery.md "Delivery feedback"); mirrored by a CHECK. */
export const DELIVERY_EVENTS = Object.freeze(['delivered', 'bounced', 'complained', 'rejected', 'delayed'] as const)
export type DeliveryEvent = (typeof DELIVERY_EVENTS)[number]

/** Why a destination is on `outbox.suppressed_destinations`; mirrored by a CHECK. */
export const SUPPRESSION_REASONS = Object.freeze(['permanent_bounce', 'complaint'] as const)
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number]

/** pg-boss queue names (defined with the queues themselves, in src/db/queues.ts). */
export { QUEUES } from '../db/queues.ts'

/** The only thing a pg-boss job carries: operators read pgboss.job, so no secret or address. */
/**
 * A delivery job's data. `traceparent` (W3C trace context of the enqueue, only while tracing is on)
 * lets the worker's delivery span continue the request's trace; optional, so a worker that predates
 * it reads the job as before. Never anything secret: a job payload carries ids only.
 */
export type DeliveryJobData = { messageId: string; traceparent?: string }

/**
 * The purposes a complaint suppression stops: mail to an address nobody there has yet proved to
 * own (a sign-up, a new sign-in method, an invitation), which a stranger can aim at anyone. A
 * complaint never stops a recovery, a step-up or a security notice: those go to an account's
 * verified identifier, the owner asks for them (or must hear of them), and a stranger's spam that
 * the owner reported must not lock the owner out; the destination budget bounds the rest. A
 * permanent bounce stops every purpose (docs/delivery.md "Delivery feedback").
 */
export const COMPLAINT_STOPS_PURPOSES = Object.freeze(['sign_up', 'add_sign_in_method', 'invitation'] as const satisfies readonly Purpose[])
