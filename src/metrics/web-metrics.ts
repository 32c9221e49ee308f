import type { Knex } from 'knex'
import { Counter, Gauge, Registry } from 'prom-client'
import { gauges } from '../platform/outbox-admin.ts'
import { PROVIDER_VIEW_GAUGE } from '../outbox/provider-health.ts'

/**
 * The web's GET /metrics: gauges read from the database at each scrape, so they are right whichever
 * worker did the work and even while no worker runs (the lag gauge is the one to alert on).
 */
export function createWebMetrics(db: Knex, clock: () => Date) {
  const registry = new Registry()
  const messages = new Gauge({
    name: 'sealpost_outbox_messages',
    help: 'Security outbox messages by state',
    labelNames: ['state'],
    registers: [registry],
  })
  const lag = new Gauge({
    name: 'sealpost_outbox_oldest_due_pending_age_seconds',
    help: 'Age of the oldest pending message already due (0 when none): the outbox lag',
    registers: [registry],
  })
  const deadLetters = new Gauge({
    name: 'sealpost_outbox_dead_letters_last_24h',
    help: 'Messages dead-lettered in the last 24 hours, by reason',
    labelNames: ['reason'],
    registers: [registry],
  })
  const queue = new Gauge({
    name: 'sealpost_outbox_queue_jobs',
    help: 'Jobs of the security-outbox pg-boss queue, by state',
    labelNames: ['state'],
    registers: [registry],
  })
  const deliveryEvents = new Gauge({
    name: 'sealpost_delivery_events_last_24h',
    help: 'Provider delivery events received in the last 24 hours, by purpose and event',
    labelNames: ['purpose', 'event'],
    registers: [registry],
  })
  const webhooks = new Counter({
    name: 'sealpost_webhook_events_total',
    help: 'Provider webhook deliveries handled by this web process, by provider, outcome and refusal reason',
    labelNames: ['provider', 'outcome', 'reason'],
    registers: [registry],
  })
  const breachedPasswordChecks = new Counter({
    name: 'sealpost_breached_password_checks_total',
    help: 'Breached-password lookups of new passwords by this web process, by outcome (unavailable = accepted unchecked)',
    labelNames: ['outcome'],
    registers: [registry],
  })
  const providerState = new Gauge({
    name: 'sealpost_provider_state',
    help: "Each provider's outage hold, fleet-wide: 0 up, 1 probing (one message tests it), 2 held down (its messages wait)",
    labelNames: ['provider'],
    registers: [registry],
  })
  const scrapeOk = new Gauge({
    name: 'sealpost_outbox_metrics_scrape_ok',
    help: '1 when the last scrape could read the database',
    registers: [registry],
  })
  function backlogOf(summary: Awaited<ReturnType<typeof gauges>>) {
    for (const [state, count] of Object.entries(summary.states)) messages.set({ state }, count)
    lag.set(summary.oldestDuePendingAgeSeconds ?? 0)
    for (const [reason, count] of Object.entries(summary.deadLettersLast24h)) deadLetters.set({ reason }, count)
    for (const [state, count] of Object.entries(summary.queue)) queue.set({ state }, count)
    for (const { provider, state } of summary.providers) providerState.set({ provider }, PROVIDER_VIEW_GAUGE[state])
    for (const [purpose, events] of Object.entries(summary.deliveryEventsLast24h)) {
      for (const [event, count] of Object.entries(events)) deliveryEvents.set({ purpose, event }, count)
    }
  }
  return {
    registry,
    /** One webhook outcome (stored, duplicate, unknown_message, ignored, refused with its reason…). */
    webhook: (provider: string, outcome: string, reason?: string) => {
      webhooks.inc({ provider, outcome, reason: reason ?? '' })
    },
    /** One breached-password lookup's outcome (clean, breached, unavailable). */
    breachedPasswordCheck: (outcome: string) => {
      breachedPasswordChecks.inc({ outcome })
    },
    /** Reads the database, then renders: call once per scrape. */
    async render(): Promise<string> {
      try {
        backlogOf(await gauges(db, clock()))
        scrapeOk.set(1)
      } catch {
        scrapeOk.set(0)
      }
      return await registry.metrics()
    },
  }
}
