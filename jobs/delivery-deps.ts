import type { Knex } from 'knex'
import type { Job, PgBoss } from 'pg-boss'
import type { KeyRing } from '../src/crypto/key-ring.ts'
import type { Templates } from '../src/delivery/templates.ts'
import type { Logger } from '../src/logging/logger.ts'
import type { WorkerMetrics } from '../src/metrics/worker-metrics.ts'
import type { ClaimRequest } from '../src/outbox/claim.ts'
import type { Channel, DeliveryJobData } from '../src/outbox/constants.ts'
import type { RecordRequest } from '../src/outbox/outcomes.ts'
import type { RetrySettings } from '../src/outbox/retry-policy.ts'
import type { SendCaps } from '../src/outbox/send-caps.ts'
import type { Provider } from '../src/providers/provider.ts'

/**
 * What every step of a delivery takes (jobs/deliver.ts, deliver-routes.ts, deliver-holds.ts,
 * deliver-caps.ts): its own module, so the steps share it without importing each other in a circle.
 */

/** Everything a delivery needs, injected so tests drive the clock and the providers. */
export type DeliveryDeps = {
  db: Knex
  boss: PgBoss
  /** The OUTBOX_ENCRYPTION_KEYS ring: an envelope opens under the key its id names. */
  outboxKey: KeyRing
  /** Each channel's providers in failover order (EMAIL_PROVIDERS): the breaker and failover pick among them. */
  providers: Partial<Record<Channel, readonly Provider[]>>
  clock: () => Date
  logger: Logger
  settings: RetrySettings & { sendTimeoutMs: number }
  /** `<base>/join#token=…`; a worker without one does not start (no message ever spends attempts on it). */
  invitationLinkBaseUrl: string
  metrics?: WorkerMetrics
  /** The message templates with this deployment's branding (default: PRODUCT_NAME Sealpost, en). */
  templates?: Templates
  /** SEND_CAP_PER_HOUR and PHONE_CAP_PER_COUNTRY_PER_HOUR (default: none). */
  sendCaps?: SendCaps
  /** PHONE_CHANNELS: the phone channels allowed, in fallback order (default: WhatsApp, then SMS). */
  phoneChannels?: readonly Channel[]
}

export type DeliveryJob = Pick<Job<DeliveryJobData>, 'id' | 'retryCount' | 'data'>

/** A claimed message's outcome on its way to the record step, with what its log lines carry. */
export type PendingRecord = RecordRequest & { context: Record<string, unknown> }

/** What a job asks the claim step for: its message, under its own pg-boss attempt. */
export function claimRequestOf(job: DeliveryJob): ClaimRequest {
  return { messageId: job.data.messageId, lease: { jobId: job.id, retryCount: job.retryCount } }
}
