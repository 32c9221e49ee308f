import { register } from 'node:module'
import path from 'node:path'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { registerInstrumentations } from '@opentelemetry/instrumentation'
import { ExpressInstrumentation } from '@opentelemetry/instrumentation-express'
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http'
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg'
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici'
import { WinstonInstrumentation } from '@opentelemetry/instrumentation-winston'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { SpanKind } from '@opentelemetry/api'
import { BatchSpanProcessor, NodeTracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-node'
import { createAddHookMessageChannel } from 'import-in-the-middle'

/** The process a span came from, by the entry point the Procfile or npm script started. */
const SERVICE_BY_ENTRY: Readonly<Record<string, string>> = Object.freeze({
  'web.ts': 'sealpost-web',
  'worker.ts': 'sealpost-worker',
  'start.ts': 'sealpost-all-in-one',
})

/** Attributes that may carry a URL's query string, where a caller can put anything (a token too). */
const URL_ATTRIBUTES = new Set(['url.full', 'http.url', 'http.target', 'url.original'])
/** Attributes never exported: the query itself, and any header an instrumentation was told to copy. */
const dropped = (key: string) => key === 'url.query' || key.startsWith('http.request.header.') || key.startsWith('http.response.header.')
/**
 * Of an outgoing call, the attributes that hold its path: dropped. A path we call can carry what
 * must never leave (the breached-password range prefix of a new password, a provider account id,
 * a webhook endpoint's token); the host and the method are what an operator needs.
 */
const OUTGOING_PATH_ATTRIBUTES = new Set(['url.path', 'http.target', 'url.template', 'http.route'])

function withoutQuery(value: unknown): unknown {
  return typeof value === 'string' && value.includes('?') ? value.slice(0, value.indexOf('?')) : value
}

/** An outgoing call's URL down to its origin (`https://api.pwnedpasswords.com`). */
function originOnly(value: unknown): unknown {
  if (typeof value !== 'string') return value
  try {
    return new URL(value).origin
  } catch {
    return '[url]'
  }
}

function redactedAttributes(attributes: ReadableSpan['attributes'], outgoing = false): ReadableSpan['attributes'] {
  const kept: Record<string, ReadableSpan['attributes'][string]> = {}
  for (const [key, value] of Object.entries(attributes)) {
    if (dropped(key) || (outgoing && OUTGOING_PATH_ATTRIBUTES.has(key))) continue
    if (!URL_ATTRIBUTES.has(key)) kept[key] = value
    else kept[key] = (outgoing ? originOnly(value) : withoutQuery(value)) as typeof value
  }
  return kept
}

/** A SQL statement's span (pg): its statement is what an operator reads, never a URL. */
const isDatabaseCall = (span: ReadableSpan) => 'db.system' in span.attributes || 'db.system.name' in span.attributes

/**
 * The last word on what leaves the process in a span, whatever an instrumentation recorded: no
 * query string (a URL may carry a token), no path of an outgoing call (only its origin), no header,
 * and no error text (a library's message may quote a value; as in the logs, failures travel by
 * type only: `exception.type`, the status code).
 */
export function redactedSpan(span: ReadableSpan): ReadableSpan {
  const outgoing = span.kind === SpanKind.CLIENT && span.instrumentationScope.name !== 'sealpost' && !isDatabaseCall(span)
  return {
    // An outgoing call's name, as its method alone: some instrumentations name it after the path.
    name: outgoing ? span.name.split(' ')[0]! : span.name,
    kind: span.kind,
    spanContext: () => span.spanContext(),
    parentSpanContext: span.parentSpanContext,
    startTime: span.startTime,
    endTime: span.endTime,
    status: { code: span.status.code },
    attributes: redactedAttributes(span.attributes, outgoing),
    links: span.links,
    events: span.events.map((event) => ({
      ...event,
      attributes:
        event.name === 'exception'
          ? { 'exception.type': event.attributes?.['exception.type'] ?? 'Error' }
          : redactedAttributes(event.attributes ?? {}, outgoing),
    })),
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  }
}

function redacting(exporter: SpanExporter): SpanExporter {
  return {
    export: (spans, done) => exporter.export(spans.map(redactedSpan), done),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  }
}

/**
 * Starts OpenTelemetry tracing (docs/operations.md "Tracing"): spans of incoming requests (http,
 * Express routes), SQL statements (pg: the statement, never its parameters), outgoing provider
 * calls (http, undici) and pg-boss's own, exported over OTLP/HTTP as OpenTelemetry's variables
 * say. Must run before express and pg are imported: the Procfile preloads src/bin/tracing.ts.
 */
export async function startTracing(env: Readonly<Record<string, string | undefined>>, entry = process.argv[1] ?? ''): Promise<void> {
  // Type-stripped ESM: instrumentations see an `import` only through import-in-the-middle's loader
  // hook, told to wrap the instrumented packages alone (never our own .ts modules).
  const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel()
  register('import-in-the-middle/hook.mjs', import.meta.url, registerOptions)

  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME ?? SERVICE_BY_ENTRY[path.basename(entry)] ?? 'sealpost' }),
    spanProcessors: [new BatchSpanProcessor(redacting(new OTLPTraceExporter()))],
  })
  provider.register()
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({
        // A scrape every few seconds is noise; an outgoing call outside a request or a delivery
        // (a credential refresh) starts no trace of its own.
        ignoreIncomingRequestHook: (request) => request.url === '/metrics',
        requireParentforOutgoingSpans: true,
      }),
      new ExpressInstrumentation(),
      // Statements only: their parameters hold identifiers, hashes and envelopes. The worker's idle
      // polls start no trace of their own.
      new PgInstrumentation({ enhancedDatabaseReporting: false, requireParentSpan: true }),
      new UndiciInstrumentation({ requireParentforSpans: true }),
      // Log lines carry trace_id and span_id; the lines themselves stay on stdout only.
      new WinstonInstrumentation({ disableLogSending: true }),
    ],
  })
  await waitForAllMessagesAcknowledged()
  // A graceful stop lets the event loop empty: the last batch of spans leaves before the exit.
  process.once('beforeExit', () => void provider.shutdown())
}
