import type { Knex } from 'knex'
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import { gauges } from '../platform/outbox-admin.ts'
import { sendCapReport } from '../platform/send-cap-report.ts'
import { sendCapGauges } from './send-cap-gauges.ts'
import { PROVIDER_VIEW_GAUGE } from '../outbox/provider-health.ts'

/** Methods counted by name; any other (Node parses dozens) is `OTHER`. */
const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/** The backlog's gauges, set from one database read per scrape (`gauges` of src/platform/outbox-admin.ts). */
function backlogGauges(registry: Registry) {
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
  const providerState = new Gauge({
    name: 'sealpost_provider_state',
    help: "Each provider's outage hold, fleet-wide: 0 up, 1 probing (one message tests it), 2 held down (its messages wait)",
    labelNames: ['provider'],
    registers: [registry],
  })
  return {
    update(summary: Awaited<ReturnType<typeof gauges>>) {
      for (const [state, count] of Object.entries(summary.states)) messages.set({ state }, count)
      lag.set(summary.oldestDuePendingAgeSeconds ?? 0)
      for (const [reason, count] of Object.entries(summary.deadLettersLast24h)) deadLetters.set({ reason }, count)
      for (const [state, count] of Object.entries(summary.queue)) queue.set({ state }, count)
      for (const { provider, state } of summary.providers) providerState.set({ provider }, PROVIDER_VIEW_GAUGE[state])
      for (const [purpose, events] of Object.entries(summary.deliveryEventsLast24h)) {
        for (const [event, count] of Object.entries(events)) deliveryEvents.set({ purpose, event }, count)
      }
    },
  }
}

/**
 * The web's GET /metrics: gauges read from the database at each scrape, so they are right whichever
 * worker did the work and even while no worker runs (the lag gauge is the one to alert on).
 */
export function createWebMetrics(db: Knex, clock: () => Date) {
  const registry = new Registry()
  const backlog = backlogGauges(registry)
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
  // Labels from closed sets only: a caller chooses the URL and could otherwise mint a series per request.
  const requestDuration = new Histogram({
    name: 'sealpost_http_request_duration_seconds',
    help: "HTTP requests answered by this web process, by method, Express's route template (`unmatched` when none matched) and status class",
    labelNames: ['method', 'route', 'status_class'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  })
  const sendCaps = sendCapGauges(registry)
  const scrapeOk = new Gauge({
    name: 'sealpost_outbox_metrics_scrape_ok',
    help: '1 when the last scrape could read the database',
    registers: [registry],
  })
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
    /** One answered request: `route` is a route template (or `unmatched`), never the URL. */
    request: (method: string, route: string, status: number, seconds: number) => {
      const known = HTTP_METHODS.has(method) ? method : 'OTHER'
      requestDuration.observe({ method: known, route, status_class: `${Math.floor(status / 100)}xx` }, seconds)
    },
    /** Reads the database, then renders: call once per scrape. */
    async render(): Promise<string> {
      try {
        backlog.update(await gauges(db, clock()))
        sendCaps.update(await sendCapReport(db, clock()))
        scrapeOk.set(1)
      } catch {
        scrapeOk.set(0)
      }
      return await registry.metrics()
    },
  }
}
