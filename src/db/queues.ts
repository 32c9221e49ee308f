/** pg-boss queue names: part of the operator contract (docs/operations.md "What operators query"). */
export const QUEUES = Object.freeze({
  delivery: 'security-outbox',
  /**
   * pg-boss's dead-letter queue for delivery jobs that crashed their worker past the retry limit:
   * the crash-loop queue. Not our dead letters (`outbox.security_outbox_dead_letters`). The stored
   * name keeps its `-dlq` suffix: it is in pgboss.queue, in every queued delivery job's
   * `dead_letter` column and in operators' alerts, and renaming it would move live jobs for no gain.
   */
  crashLoop: 'security-outbox-dlq',
  expiryPurge: 'security-outbox-expiry-purge',
  retentionSweep: 'security-outbox-retention-sweep',
  /** One job per (event, endpoint) attempt of events out (docs/events.md "Delivery"). */
  webhookDelivery: 'webhook-delivery',
  /** The crash-loop queue of `webhook-delivery`, named as `security-outbox-dlq` is. */
  webhookCrashLoop: 'webhook-delivery-dlq',
  /** Writes new events' delivery rows and their jobs; at most one waiting and one running (policy `stately`). */
  webhookFanOut: 'webhook-fan-out',
} as const)
