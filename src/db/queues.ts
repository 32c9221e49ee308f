/** pg-boss queue names: part of the operator contract (DESIGN §3). */
export const QUEUES = Object.freeze({
  delivery: 'security-outbox',
  deadLetter: 'security-outbox-dlq',
  expiryPurge: 'security-outbox-expiry-purge',
  retentionSweep: 'security-outbox-retention-sweep',
} as const)
