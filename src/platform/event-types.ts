/**
 * The events Sealpost reports to subscribed endpoints (docs/events.md), mirrored by the CHECK on
 * `platform.events.type` and `platform.webhook_endpoints.events` (migration 20261202002700).
 */
export const EVENT_TYPES = Object.freeze([
  'message.accepted',
  'message.published',
  'message.delivered',
  'message.bounced',
  'message.complained',
  'message.dead_lettered',
  'destination.suppressed',
  'identity.created',
  'sign_in_method.added',
  'sign_in_method.removed',
  'password.changed',
  'sessions.revoked',
  'invitation.accepted',
] as const)
export type EventType = (typeof EVENT_TYPES)[number]

/** Why a delivery stopped without a 2xx, mirrored by nothing but operators' eyes (`last_failure`, at most 64 characters). */
export const WEBHOOK_FAILURES = Object.freeze({
  /** 4xx other than 408 and 429: the receiver refused this event. */
  rejected: 'rejected',
  retriesExhausted: 'retries_exhausted',
  /** The host resolved to an address the SSRF guard refuses (or the URL itself is refused). */
  addressRefused: 'address_refused',
  timeout: 'timeout',
  connection: 'connection_failed',
  retryable: 'retryable_status',
  endpointDisabled: 'endpoint_disabled',
  secretUnreadable: 'secret_unreadable',
} as const)
