import { timingSafeEqual, createHash } from 'node:crypto'
import type { Knex } from 'knex'
import { request } from 'undici'
import type { Logger } from '../logging/logger.ts'
import { recordDeliveryEvent, type ProviderEvent } from '../outbox/delivery-events-sql.ts'
import type { Channel } from '../outbox/constants.ts'
import { destinationHmac } from '../outbox/destination.ts'
import { sesEventFrom, twilioEventFrom, wasenderEventsFrom } from './provider-events.ts'
import { assertSubscribeUrl, parseSnsEnvelope, SnsRefusedError, verifySnsEnvelope, type CertificateSource } from './ses/sns-verifier.ts'
import { SealpostError } from '../errors/sealpost-error.ts'
import { twilioSignatureValid } from './twilio/signature.ts'

/** What one webhook delivery came to, per event: a metric label each. */
export type WebhookOutcome = 'stored' | 'duplicate' | 'unknown_message' | 'ignored' | 'subscription_confirmed' | 'refused'

/** The providers whose webhooks the web takes (a metric label). */
export type WebhookProvider = 'ses' | 'wasender' | 'whatsapp_cloud' | 'twilio'

export type WebhookDeps = {
  db: Knex
  clock: () => Date
  logger: Logger
  /** Counts every outcome (and each refusal by reason) for the web's /metrics. */
  count: (provider: WebhookProvider, outcome: WebhookOutcome, reason?: string) => void
  /** CODE_HASH_KEYS, current first: an event's recipients are matched under each, as a message's HMAC may predate a rotation. */
  codeHashKeys: readonly Buffer[]
  ses?: { topicArn: string; certificates: CertificateSource; confirmSubscription?: (url: string) => Promise<void> }
  wasender?: { secret: string }
  /** WHATSAPP_CLOUD_APP_SECRET (signs status webhooks) and WHATSAPP_CLOUD_VERIFY_TOKEN (the subscription handshake). */
  whatsappCloud?: { appSecret?: string; verifyToken?: string }
  /**
   * A status event said the phone channel a published code went out on cannot reach its number:
   * the web's asynchronous phone fallback (src/identity/phone-fallback.ts), called with the message
   * id after the event is stored. It does nothing for a message that does not qualify, and never throws for one.
   */
  onChannelUnreachable?: (messageId: string) => Promise<void>
  /** The account's auth token (it signs every callback) and the callback URL messages were sent with (from PUBLIC_BASE_URL). */
  twilio?: { authToken: string; callbackUrl: string }
}

/** A refusal the route answers 4xx; `status` is decided in src/http. */
export class WebhookRefusedError extends SealpostError {
  override name = 'WebhookRefusedError'
  readonly reason: string
  constructor(reason: string) {
    super(`webhook refused: ${reason}`)
    this.reason = reason
  }
}

/** GETs a SubscribeURL (already checked to be SNS's own ConfirmSubscription endpoint). */
export async function confirmSnsSubscription(url: string): Promise<void> {
  const response = await request(url, { method: 'GET', signal: AbortSignal.timeout(5_000) })
  await response.body.dump()
  if (response.statusCode !== 200) throw new Error(`ConfirmSubscription answered ${response.statusCode}`)
}

/** Stores one event (matched on the channel, suppressing only what it proves), counts and logs its outcome. */
export async function storeEvent(
  deps: WebhookDeps,
  provider: WebhookProvider,
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

/**
 * `POST /webhooks/ses`: an SNS delivery of the SES event topic, verified before anything is read
 * from it (sns-verifier.ts). A SubscriptionConfirmation for our topic is confirmed; a
 * Notification's SES event is stored (or ignored when it is a kind we do not record).
 */
export async function receiveSesWebhook(deps: WebhookDeps, body: string, messageType: string | undefined): Promise<WebhookOutcome> {
  try {
    if (!deps.ses) throw new SnsRefusedError('unknown_topic')
    const envelope = parseSnsEnvelope(body, messageType)
    await verifySnsEnvelope(envelope, { topicArn: deps.ses.topicArn, certificates: deps.ses.certificates, now: deps.clock() })
    if (envelope.Type === 'SubscriptionConfirmation') {
      const url = assertSubscribeUrl(envelope)
      await (deps.ses.confirmSubscription ?? confirmSnsSubscription)(url)
      deps.logger.info('SNS subscription confirmed', { topicArn: envelope.TopicArn })
      deps.count('ses', 'subscription_confirmed')
      return 'subscription_confirmed'
    }
    if (envelope.Type !== 'Notification') {
      deps.count('ses', 'ignored')
      return 'ignored'
    }
    let message: unknown
    try {
      message = JSON.parse(envelope.Message)
    } catch {
      message = undefined
    }
    const event = sesEventFrom(message, new Date(envelope.Timestamp))
    if (!event) {
      deps.count('ses', 'ignored')
      return 'ignored'
    }
    return (await storeEvent(deps, 'ses', 'email', event)).outcome
  } catch (error) {
    if (!(error instanceof SnsRefusedError)) throw error
    deps.count('ses', 'refused', error.reason)
    deps.logger.warn('SES webhook refused', { reason: error.reason })
    throw new WebhookRefusedError(error.reason)
  }
}

const digest = (text: string) => createHash('sha256').update(text).digest()
/** Whether a presented secret equals ours, in time that depends on neither (both hashed to one length first). */
export const sameSecret = (presented: string, ours: string): boolean => timingSafeEqual(digest(presented), digest(ours))

/** How the route read a Wasender delivery: its body, or why it could not (refused only once the signature holds). */
export type WasenderDelivery = { body: unknown } | { unreadable: 'unsupported_media_type' | 'malformed' }

/**
 * `POST /webhooks/wasender`: Wasender's documented check is that the `X-Webhook-Signature` header
 * equals the webhook secret configured for the session (compared here in constant time); then a
 * body the route could not read as documented is refused, and each message status update is stored.
 */
export async function receiveWasenderWebhook(
  deps: WebhookDeps,
  delivery: WasenderDelivery,
  signature: string | undefined,
): Promise<WebhookOutcome[]> {
  const refuse = (reason: string): never => {
    deps.count('wasender', 'refused', reason)
    deps.logger.warn('Wasender webhook refused', { reason })
    throw new WebhookRefusedError(reason)
  }
  if (!deps.wasender || signature === undefined || !sameSecret(signature, deps.wasender.secret)) refuse('invalid_signature')
  if ('unreadable' in delivery) return refuse(delivery.unreadable)
  const body = delivery.body
  const events = wasenderEventsFrom(body, deps.clock())
  if (events.length === 0) {
    deps.count('wasender', 'ignored')
    return ['ignored']
  }
  const outcomes: WebhookOutcome[] = []
  for (const event of events) outcomes.push((await storeEvent(deps, 'wasender', 'whatsapp', event)).outcome)
  return outcomes
}

/** How the route read a Twilio callback: its form parameters in order, or why it could not. */
export type TwilioDelivery = { params: [string, string][] } | { unreadable: 'unsupported_media_type' }

/**
 * `POST /webhooks/twilio`: a message status callback. The `X-Twilio-Signature` must be Twilio's
 * over the callback URL messages were sent with (never one built from the request's Host) and
 * every parameter received; then the status is stored once per message, status and error code
 * (Twilio sends no time: a replay is a duplicate, which is the only replay defence it leaves).
 */
export async function receiveTwilioWebhook(
  deps: WebhookDeps,
  delivery: TwilioDelivery,
  signature: string | undefined,
): Promise<WebhookOutcome> {
  const refuse = (reason: string): never => {
    deps.count('twilio', 'refused', reason)
    deps.logger.warn('Twilio webhook refused', { reason })
    throw new WebhookRefusedError(reason)
  }
  const params = 'params' in delivery ? delivery.params : []
  if (!deps.twilio || !twilioSignatureValid(deps.twilio.authToken, deps.twilio.callbackUrl, params, signature)) refuse('invalid_signature')
  if ('unreadable' in delivery) return refuse(delivery.unreadable)
  const event = twilioEventFrom(new Map(params))
  if (!event) {
    deps.count('twilio', 'ignored')
    return 'ignored'
  }
  return (await storeEvent(deps, 'twilio', 'sms', event)).outcome
}
