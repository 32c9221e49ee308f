import type { Knex } from 'knex'
import { z } from 'zod'
import { SealpostError } from '../errors/sealpost-error.ts'
import type { Logger } from '../logging/logger.ts'
import type { Channel, ProviderId } from '../outbox/constants.ts'
import { recordDeliveryEvent, type ProviderEvent } from '../outbox/delivery-events-sql.ts'
import { destinationHmac } from '../outbox/destination.ts'

/** What one webhook delivery came to, per event: a metric label each. */
export type WebhookOutcome = 'stored' | 'duplicate' | 'unknown_message' | 'ignored' | 'subscription_confirmed' | 'refused'

/** The outcomes an answer reports (a refusal is a problem answer instead). */
export const WebhookOutcomeSchema = z.enum(['stored', 'duplicate', 'unknown_message', 'ignored', 'subscription_confirmed'])

/** What every provider's webhook needs from the web, whichever provider it is. */
export type WebhookDeps = {
  db: Knex
  clock: () => Date
  logger: Logger
  /** Counts every outcome (and each refusal by reason) for the web's /metrics. */
  count: (provider: ProviderId, outcome: WebhookOutcome, reason?: string) => void
  /** CODE_HASH_KEYS, current first: an event's recipients are matched under each, as a message's HMAC may predate a rotation. */
  codeHashKeys: readonly Buffer[]
  /**
   * A status event said the phone channel a published code went out on cannot reach its number:
   * the web's asynchronous phone fallback (src/identity/phone-fallback.ts), called with the message
   * id after the event is stored. It does nothing for a message that does not qualify, and never throws for one.
   */
  onChannelUnreachable?: (messageId: string) => Promise<void>
}

/**
 * Why a delivery was refused; the web answers each with a problem (its status is decided in
 * src/http: `malformed` 400, `unsupported_media_type` 415, `certificate_unavailable` 503, any other 403).
 */
export class WebhookRefusedError extends SealpostError {
  override name = 'WebhookRefusedError'
  readonly reason: string
  constructor(reason: string) {
    super(`webhook refused: ${reason}`)
    this.reason = reason
  }
}

/** Where a refused inbound call is told: `sealpost_webhook_events_total` (by source and reason) and the log. */
export type RefusalSink<S extends string> = { count: (source: S, outcome: 'refused', reason: string) => void; logger: Pick<Logger, 'warn'> }

/**
 * Counts and logs one refused inbound call, a provider's webhook or an identity system's hook
 * (src/http/routes/hooks.ts), by its reason and never by what it carried (a body, a signature, a
 * credential). The one place a refusal is told; the caller throws what its route answers.
 */
export function countRefusal<S extends string>(sink: RefusalSink<S>, source: S, line: string, reason: string, fields = {}): void {
  sink.count(source, 'refused', reason)
  sink.logger.warn(line, { ...fields, reason })
}

/** Counts and logs a provider webhook's refusal, then throws it. */
export function refuseWebhook(deps: WebhookDeps, provider: ProviderId, title: string, reason: string): never {
  countRefusal(deps, provider, `${title} webhook refused`, reason)
  throw new WebhookRefusedError(reason)
}

/** Stores one event (matched on the channel, suppressing only what it proves), counts and logs its outcome. */
export async function storeEvent(
  deps: WebhookDeps,
  provider: ProviderId,
  channel: Channel,
  event: ProviderEvent,
): Promise<{ outcome: WebhookOutcome; messageId?: string }> {
  const recipientHmacs = event.recipients.flatMap((recipient) => deps.codeHashKeys.map((key) => destinationHmac(key, channel, recipient)))
  const recorded = await recordDeliveryEvent(deps.db, channel, event, deps.clock(), recipientHmacs)
  deps.count(provider, recorded.outcome)
  if (recorded.outcome !== 'unknown_message')
    deps.logger.info('delivery event', {
      provider,
      messageId: recorded.messageId,
      event: event.event,
      subtype: event.subtype,
      outcome: recorded.outcome,
      suppressed: recorded.suppressed ? event.suppress : null,
    })
  return recorded.outcome === 'unknown_message'
    ? { outcome: recorded.outcome }
    : { outcome: recorded.outcome, messageId: recorded.messageId }
}

/** A JSON body as the web read it: parsed and as the route's schema documents it, or why not (refused only once the signature holds). */
export type JsonDelivery = { body: unknown } | { unreadable: 'unsupported_media_type' | 'malformed' }
/** A form body as the web read it: its pairs in order (a signature may cover each), or why not. */
export type FormDelivery = { params: [string, string][] } | { unreadable: 'unsupported_media_type' }

/**
 * How the web reads each kind of webhook body before a provider's code sees it: `text` of any media
 * type (SNS posts JSON as text/plain), `raw` bytes (a signature over the body as sent), `json` and
 * `form` read as their media type only, `none` for a GET.
 */
export type Readings = { text: string; raw: Buffer; json: JsonDelivery; form: FormDelivery; none: undefined }

/** One inbound request as a provider's webhook sees it: the body as read, its headers and query. */
export type InboundRequest<B> = { body: B; header(name: string): string | undefined; query(name: string): string | undefined }

type RouteOf<S, R extends keyof Readings> = {
  operationId: string
  method: R extends 'none' ? 'get' : 'post'
  path: string
  summary: string
  description?: string
  read: R
  /** The largest body the web reads (express's `limit`). */
  limit?: string
  /** The body as the provider documents it (the API document; a `json` body is checked against it). */
  body?: z.ZodType
  bodyContentType?: string
  query?: z.ZodObject
  answer: { body: z.ZodType; description: string; contentType?: 'text/plain' }
  /** Every reason the route may refuse with (WebhookRefusedError). */
  refusals: readonly string[]
  handle(deps: WebhookDeps, settings: S | undefined, request: InboundRequest<Readings[R]>): Promise<unknown>
}

/** One webhook route of a provider, handled with its settings (undefined while unconfigured: it refuses everything). */
export type WebhookRoute<S> = { [R in keyof Readings]: RouteOf<S, R> }[keyof Readings]

/** What the web seams a test may replace (how a confirmed SNS subscription's SubscribeURL is visited). */
export type WebhookSeams = { confirmSubscription?: (url: string) => Promise<void> }

/** A provider's inbound webhook: its routes, and its settings from the configuration (signing secrets, topics). */
export interface WebhookRoutes<C> {
  readonly routes: readonly WebhookRoute<never>[]
  bind(config: C | undefined, seams: WebhookSeams): BoundWebhook[]
}

/** A route with its provider's settings, as the web mounts it. */
export type BoundWebhook = { provider: ProviderId; route: WebhookRoute<unknown>; settings: unknown }

/** A provider's webhook: `settings` reads its slice of the configuration; each route is bound to what it returned. */
export function providerWebhook<C, S>(
  provider: ProviderId,
  settings: (config: C, seams: WebhookSeams) => S | undefined,
  routes: readonly WebhookRoute<S>[],
): WebhookRoutes<C> {
  return {
    routes,
    bind: (config, seams) => {
      const bound = config === undefined ? undefined : settings(config, seams)
      return routes.map((route) => ({ provider, route, settings: bound }))
    },
  }
}
