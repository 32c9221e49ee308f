import { providerAgent, sendProviderRequest } from '../http.ts'

/** The parts of the SDK's signed HttpRequest a handler reads. */
type SdkRequest = {
  method: string
  protocol: string
  hostname: string
  port?: number
  path: string
  query?: Record<string, string | string[] | null>
  headers: Record<string, string>
  body?: unknown
}

const queryOf = (query: SdkRequest['query']): string => {
  const pairs = Object.entries(query ?? {}).flatMap(([name, value]) =>
    (Array.isArray(value) ? value : [value]).map((item) =>
      item === null ? encodeURIComponent(name) : `${encodeURIComponent(name)}=${encodeURIComponent(item)}`,
    ),
  )
  return pairs.length > 0 ? `?${pairs.join('&')}` : ''
}

/**
 * The SES client's request handler: the SDK builds, signs and reads each request as ever; it goes
 * out through the same undici transport as the other providers' (src/providers/http.ts), so a
 * failure before an answer knows whether the request had reached a connected socket, which the
 * SDK's own handler cannot tell (a TLS handshake that never ends would look like a lost answer).
 */
export function sesRequestHandler(concurrency: number | undefined) {
  const agent = providerAgent(concurrency)
  const unbounded = new AbortController().signal
  // The sends SES answered (by their signal): a bound that ends one while the SDK reads the body came after SES acted.
  const answered = new WeakSet<object>()
  return {
    async handle(request: SdkRequest, options: { abortSignal?: unknown } = {}) {
      if (request.body !== undefined && typeof request.body !== 'string' && !(request.body instanceof Uint8Array))
        throw new TypeError('the SES request handler sends string or byte bodies only')
      const port = request.port ? `:${request.port}` : ''
      const signal = (options.abortSignal as AbortSignal | undefined) ?? unbounded
      const response = await sendProviderRequest(
        agent,
        `${request.protocol}//${request.hostname}${port}${request.path}${queryOf(request.query)}`,
        { method: request.method, headers: request.headers, body: request.body },
        signal,
      )
      answered.add(signal)
      const headers = Object.fromEntries(
        Object.entries(response.headers).flatMap(([name, value]) =>
          value === undefined ? [] : [[name, Array.isArray(value) ? value.join(', ') : value]],
        ),
      )
      return { response: { statusCode: response.statusCode, headers, body: response.body } }
    },
    /** Whether SES had begun to answer the send bounded by `signal` (its status line came). */
    answered: (signal: AbortSignal): boolean => answered.has(signal),
    updateHttpClientConfig: () => undefined,
    httpHandlerConfigs: () => ({}),
    destroy: () => void agent.close(),
  }
}
