import { decideMetricsAccess, type MetricsAccess } from './access.ts'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { Asked, CapKind } from '../outbox/send-caps.ts'

/** The delivery loop's instruments: attempts by outcome, dead letters, provider calls and their latency. */
function deliveryInstruments(registry: Registry) {
  return {
    attempts: new Counter({
      name: 'sealpost_delivery_attempts_total',
      help: 'Delivery attempts recorded, by outcome and failure class',
      labelNames: ['outcome', 'failure_class'],
      registers: [registry],
    }),
    deadLetters: new Counter({
      name: 'sealpost_dead_letters_total',
      help: 'Messages dead-lettered by this worker, by reason',
      labelNames: ['reason'],
      registers: [registry],
    }),
    sendDuration: new Histogram({
      name: 'sealpost_send_duration_seconds',
      help: 'Provider call duration',
      labelNames: ['channel'],
      registers: [registry],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    }),
    commitToSend: new Histogram({
      name: 'sealpost_commit_to_send_seconds',
      help: 'From the enqueue commit (message created_at) to the start of its first provider call',
      labelNames: ['channel'],
      registers: [registry],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 120],
    }),
    sends: new Counter({
      name: 'sealpost_sends_total',
      help: 'Provider calls started, by channel (what the send caps count)',
      labelNames: ['channel'],
      registers: [registry],
    }),
  }
}

/** What waits without an attempt: a send cap's holds and fill, no provider here, an envelope not opened here, a misconfigured provider. */
function holdInstruments(registry: Registry) {
  return {
    heldByCap: new Counter({
      name: 'sealpost_send_cap_held_total',
      help: 'Messages a send cap held back to the next hour (no attempt spent), by channel, cap (prefix, country or channel) and who asked (owner, stranger, courier)',
      labelNames: ['channel', 'cap', 'asked'],
      registers: [registry],
    }),
    capUsed: new Gauge({
      name: 'sealpost_send_cap_used_ratio',
      help: "The fullest send cap of each kind (channel, country or prefix) and class (owner, stranger, courier) this hour, as the fleet's counter stood when this worker last reserved in it: sent / the class's cap",
      labelNames: ['channel', 'scope_kind', 'asked'],
      registers: [registry],
    }),
    withoutProvider: new Counter({
      name: 'sealpost_messages_without_provider_total',
      help: 'Claimed messages this worker has no provider for (deferred a minute, no attempt spent), by channel: a misconfiguration',
      labelNames: ['channel'],
      registers: [registry],
    }),
    unreadableFormat: new Counter({
      name: 'sealpost_messages_unreadable_format_total',
      help: 'Claimed messages sealed in an envelope version this worker does not open (deferred a minute, no attempt spent), by format: a newer release wrote them',
      labelNames: ['format'],
      registers: [registry],
    }),
    misconfigured: new Counter({
      name: 'sealpost_provider_misconfigured_total',
      help: 'Sends a provider refused as our own misconfiguration (an expired token, a missing template; no attempt spent, the provider held down), by provider',
      labelNames: ['provider'],
      registers: [registry],
    }),
  }
}

/**
 * What a worker process counts as it works (served on WORKER_METRICS_PORT): attempts by outcome
 * and failure class, dead letters by reason, provider call duration, commit-to-send latency, the
 * provider calls per channel and the messages a send cap held, and the rows the schedules touched. The web's /metrics carries the database-derived gauges.
 */
export function createWorkerMetrics() {
  const registry = new Registry()
  const { attempts, deadLetters, sendDuration, commitToSend, sends } = deliveryInstruments(registry)
  const { heldByCap, capUsed, withoutProvider, unreadableFormat, misconfigured } = holdInstruments(registry)
  // Each gauge's hour and value: a new hour starts from its first reading, not from the last hour's peak.
  const capUsedNow = new Map<string, { hour: number; ratio: number }>()
  const maintenance = new Counter({
    name: 'sealpost_maintenance_rows_total',
    help: 'Rows the expiry purge and retention sweep changed, by pass and kind',
    labelNames: ['pass', 'kind'],
    registers: [registry],
  })
  return {
    registry,
    attempt(outcome: string, failureClass: string | null) {
      attempts.inc({ outcome, failure_class: failureClass ?? '' })
    },
    deadLettered(reason: string) {
      deadLetters.inc({ reason })
    },
    sent(channel: string, seconds: number) {
      sendDuration.observe({ channel }, seconds)
    },
    sendStarted(channel: string) {
      sends.inc({ channel })
    },
    heldBySendCap(channel: string, cap: CapKind, asked: Asked, count: number) {
      heldByCap.inc({ channel, cap, asked }, count)
    },
    /** One reservation's reading of a cap (no scope in the labels: a prefix or a calling code would be unbounded). */
    sendCapUsed(channel: string, scopeKind: CapKind, asked: Asked, ratio: number, windowStart: Date) {
      const key = `${channel}:${scopeKind}:${asked}`
      const hour = windowStart.getTime()
      const last = capUsedNow.get(key)
      const peak = last?.hour === hour ? Math.max(last.ratio, ratio) : ratio
      capUsedNow.set(key, { hour, ratio: peak })
      capUsed.set({ channel, scope_kind: scopeKind, asked }, peak)
    },
    unreadableFormat(format: string) {
      unreadableFormat.inc({ format })
    },
    withoutProvider(channel: string) {
      withoutProvider.inc({ channel })
    },
    providerMisconfigured(provider: string) {
      misconfigured.inc({ provider })
    },
    firstSendStarted(channel: string, seconds: number) {
      commitToSend.observe({ channel }, Math.max(0, seconds))
    },
    maintenanceDone(pass: string, counts: Record<string, number>) {
      for (const [kind, count] of Object.entries(counts)) if (kind !== 'batches' && count > 0) maintenance.inc({ pass, kind }, count)
    },
  }
}

export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>

/** A plain HTTP listener for Prometheus: GET /metrics, nothing else. */
export async function serveMetrics(
  registry: Registry,
  port: number,
  access: MetricsAccess,
  host = '0.0.0.0',
): Promise<{ url: string; stop: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const decision = req.method === 'GET' && req.url === '/metrics' ? decideMetricsAccess(access, req.headers.authorization) : 'not_served'
    if (decision !== 'allowed') {
      res.writeHead(decision === 'unauthenticated' ? 401 : 404).end()
      return
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => res.writeHead(500).end(),
    )
  })
  await new Promise<void>((resolve, reject) => server.listen(port, host, resolve).once('error', reject))
  const address = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${address.port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
