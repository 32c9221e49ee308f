import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes } from '@opentelemetry/api'

/** The scope of Sealpost's own spans (the enqueue, the delivery), beside the libraries'. */
const tracer = () => trace.getTracer('sealpost')

/** W3C trace context: version 00, a trace id, a parent span id, flags. */
const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/

/**
 * The W3C `traceparent` of the span running now, for a job to carry to the worker, or undefined
 * when tracing is off (no SDK registered: the API's propagator injects nothing). It names a trace,
 * never anything of the request.
 */
export function currentTraceparent(): string | undefined {
  const carrier: Record<string, string> = {}
  propagation.inject(context.active(), carrier)
  return carrier.traceparent && TRACEPARENT.test(carrier.traceparent) ? carrier.traceparent : undefined
}

/** What a span's body may add once it knows more (the message id it sealed). */
export type SpanNotes = { setAttribute(key: string, value: string | number | boolean): unknown }

/**
 * Runs `fn` in a span of its own, a child of the span running now. A `consumer` span instead
 * continues the trace of `parent` (the job's `traceparent`), however long the job waited and
 * whichever process runs it, or starts a new trace without one. A failure is recorded by its error
 * type alone, as in the logs. Free when tracing is off.
 */
export async function inSpan<T>(
  name: string,
  options: { kind: 'producer' | 'consumer'; attributes: Attributes; parent?: string | undefined },
  fn: (span: SpanNotes) => Promise<T>,
): Promise<T> {
  const parent =
    options.kind === 'producer'
      ? context.active()
      : options.parent !== undefined && TRACEPARENT.test(options.parent)
        ? propagation.extract(ROOT_CONTEXT, { traceparent: options.parent })
        : ROOT_CONTEXT
  const kind = options.kind === 'producer' ? SpanKind.PRODUCER : SpanKind.CONSUMER
  return tracer().startActiveSpan(name, { kind, attributes: options.attributes }, parent, async (span) => {
    try {
      return await fn(span)
    } catch (error) {
      span.setAttribute('error.type', error instanceof Error ? error.name : 'unknown')
      span.setStatus({ code: SpanStatusCode.ERROR })
      throw error
    } finally {
      span.end()
    }
  })
}
