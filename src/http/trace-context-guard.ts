import type { IncomingMessage, Server } from 'node:http'
import proxyaddr from 'proxy-addr'

/** The W3C trace context headers a caller could steer a trace with. */
const TRACE_HEADERS = ['traceparent', 'tracestate', 'baggage'] as const

/** Express's `trust proxy` as a proxy-addr trust function (Express compiles the setting the same way). */
function hopsTrusted(trustProxy: boolean | number | readonly string[] | undefined): (address: string, hop: number) => boolean {
  if (trustProxy === true) return () => true
  if (typeof trustProxy === 'number') return (_address, hop) => hop < trustProxy
  if (!trustProxy || trustProxy.length === 0) return () => false
  return proxyaddr.compile([...trustProxy])
}

/**
 * Inbound trace context from trusted callers only (TRACE_TRUSTED_CALLERS, docs/operations.md
 * "Tracing"): any other request has its W3C headers dropped before the HTTP instrumentation reads
 * them, so it starts a trace of its own. Otherwise a caller's `traceparent` would decide whether
 * its request is sampled (`-00` hides it, `-01` forces it in) and carry a trace id of its choosing
 * into the job and the worker. The client is the address every per-client limit uses (`req.ip`
 * under TRUST_PROXY). Installed on the server itself, in front of the instrumented
 * `http.Server.prototype.emit`, which reads the headers before any Express middleware runs.
 */
export function traceContextOnlyFrom(
  server: Server,
  options: { trusted: readonly string[]; trustProxy?: boolean | number | readonly string[] | undefined },
): void {
  const trusted = options.trusted.length > 0 ? proxyaddr.compile([...options.trusted]) : () => false
  const hops = hopsTrusted(options.trustProxy)
  const emit = server.emit.bind(server) as (event: string | symbol, ...args: unknown[]) => boolean
  server.emit = (event: string | symbol, ...args: unknown[]): boolean => {
    if (event === 'request') {
      const req = args[0] as IncomingMessage
      const carries = TRACE_HEADERS.some((header) => req.headers[header] !== undefined)
      if (carries && !trusted(proxyaddr(req, hops), 0)) for (const header of TRACE_HEADERS) delete req.headers[header]
    }
    return emit(event, ...args)
  }
}
