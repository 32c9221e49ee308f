import { Agent, request, type Dispatcher } from 'undici'
import { SealpostError } from '../errors/sealpost-error.ts'
import { providerFault, type DeliveryFailureError } from './provider.ts'

/**
 * A provider request that failed before an answer came: `written` says whether it had reached a
 * connected socket (the provider may then have acted on it). Its message is fixed text.
 */
export class TransportFailureError extends SealpostError {
  override name = 'TransportFailureError'
  readonly written: boolean
  readonly code: string
  constructor(written: boolean, code: string) {
    super(`provider request failed ${written ? 'after' : 'before'} it was written`)
    this.written = written
    this.code = code
  }
}

/** A transport failure as a row of the fault table: the provider cannot have acted before the write, may have after it. */
export const transportFault = (failure: TransportFailureError): DeliveryFailureError =>
  providerFault(failure.written ? 'indeterminate' : 'unavailable', failure.code)

/** One connection per send slot (WORKER_CONCURRENCY, at least 64), so no send waits for a socket and spends its timeout queued. */
export function providerAgent(concurrency: number | undefined): Agent {
  return new Agent({ keepAliveTimeout: 10_000, connections: Math.max(64, concurrency ?? 0) })
}

/** The handler `handler`, telling `onWritten` when undici starts the request on a connected socket (just before writing it). */
function watchWrite(handler: Dispatcher.DispatchHandler, onWritten: () => void): Dispatcher.DispatchHandler {
  return {
    onRequestStart: (controller, context) => {
      onWritten()
      handler.onRequestStart?.(controller, context)
    },
    onRequestUpgrade: (controller, statusCode, headers, socket) => handler.onRequestUpgrade?.(controller, statusCode, headers, socket),
    onResponseStart: (controller, statusCode, headers, statusMessage) =>
      handler.onResponseStart?.(controller, statusCode, headers, statusMessage),
    onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
    onResponseEnd: (controller, trailers) => handler.onResponseEnd?.(controller, trailers),
    onResponseError: (controller, error) => handler.onResponseError?.(controller, error),
  }
}

/**
 * `signal`, with its end passed on only after the event loop has read the sockets once more. Node
 * runs a due timer before it reads the sockets: after a stall (a worker starting on a loaded
 * machine, a long GC) the bound's timer would cut off a send whose answer had reached the socket
 * while the bound still ran — INDETERMINATE, and a duplicate when its retry is taken too. One
 * `setImmediate` comes after that read (the poll phase), so an answer already there wins; one not
 * yet there still ends at the bound, later only by the stall itself (docs/delivery.md "How a message travels").
 */
function afterPendingReads(signal: AbortSignal): { signal: AbortSignal; release: () => void } {
  const settled = new AbortController()
  const pass = () => setImmediate(() => settled.abort(signal.reason))
  if (signal.aborted) settled.abort(signal.reason)
  else signal.addEventListener('abort', pass, { once: true })
  // Once the exchange is over, a long-lived bound (the SES handler's unbounded one) keeps no listener per send.
  return { signal: settled.signal, release: () => signal.removeEventListener('abort', pass) }
}

/** Rejects when `signal` aborts (at once if it has). */
const abortOf = (signal: AbortSignal) =>
  new Promise<never>((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason as Error)
    else signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true })
  })

export type ProviderRequest = {
  method: Dispatcher.HttpMethod
  headers: Record<string, string>
  body?: string | Uint8Array
}

/**
 * Sends one provider request through `agent`, bounded by `signal`. A failure before any answer is
 * a TransportFailureError that knows whether the request had reached a connected socket: a refused
 * connection or a TLS handshake that never ends is before (the send's own bound wins over undici's
 * 10 s connect timeout, which is the only time it notices an abort during a handshake); a reset or
 * a timeout while waiting for the answer is after.
 */
export async function sendProviderRequest(
  agent: Dispatcher,
  url: string,
  options: ProviderRequest,
  bound: AbortSignal,
): Promise<Dispatcher.ResponseData> {
  const { signal, release } = afterPendingReads(bound)
  let written = false
  const dispatcher = agent.compose(
    (dispatch) => (dispatchOptions, handler) =>
      dispatch(
        dispatchOptions,
        watchWrite(handler, () => (written = true)),
      ),
  )
  try {
    const sent = request(url, { ...options, dispatcher, signal })
    sent.then((late) => (signal.aborted ? late.body.dump() : undefined)).catch(() => undefined)
    const response = await Promise.race([sent, abortOf(signal)])
    // The bound still covers the body's read; it lets go once the body is read or dropped.
    response.body.once('close', release)
    return response
  } catch (error) {
    release()
    const { name, code } = (error ?? {}) as { name?: string; code?: string }
    throw new TransportFailureError(written, signal.aborted ? 'Timeout' : (code ?? name ?? 'unknown'))
  }
}

/** A response header's first value. */
export function headerOf(headers: Dispatcher.ResponseData['headers'], name: string): string | undefined {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** The answer's JSON body, or undefined when it has none that parses (a proxy's page, an empty 502). */
export async function jsonOf(response: Dispatcher.ResponseData): Promise<unknown> {
  try {
    return await response.body.json()
  } catch {
    return undefined
  }
}
