import { createHmac } from 'node:crypto'
import { sameSecret } from '../../crypto/constant-time.ts'
import { describeError } from '../../logging/logger.ts'
import { whatsAppCloudStatusesFrom } from './events.ts'
import { isChannelUnreachableCode } from './faults.ts'
import { refuseWebhook, storeEvent, type WebhookDeps, type WebhookOutcome } from '../webhooks.ts'

/** WHATSAPP_CLOUD_APP_SECRET (signs status webhooks) and WHATSAPP_CLOUD_VERIFY_TOKEN (the subscription handshake). */
export type WhatsAppCloudWebhookSettings = { appSecret?: string; verifyToken?: string }

/** The web's webhook dependencies with this provider's settings. */
type CloudWebhookDeps = WebhookDeps & { whatsappCloud?: WhatsAppCloudWebhookSettings }

/**
 * Meta retries an unanswered webhook for up to seven days; a signed status older than that is a
 * replay, stored by nobody (the delivery-events table dedupes the ones inside the window).
 */
const REPLAY_WINDOW_MS = 7 * 24 * 3600 * 1000

/** Meta's challenges are digits; anything else is not echoed back. */
const CHALLENGE = /^[A-Za-z0-9_-]{1,128}$/

const refuse = (deps: WebhookDeps, reason: string): never => refuseWebhook(deps, 'whatsapp_cloud', 'WhatsApp Cloud API', reason)

/**
 * `GET /webhooks/whatsapp-cloud`: Meta's subscription handshake (`hub.mode=subscribe`,
 * `hub.verify_token` = WHATSAPP_CLOUD_VERIFY_TOKEN) answered with `hub.challenge`.
 */
export function verifyWhatsAppCloudSubscription(
  deps: CloudWebhookDeps,
  query: { mode?: string; verifyToken?: string; challenge?: string },
): string {
  const ours = deps.whatsappCloud?.verifyToken
  if (ours === undefined || query.mode !== 'subscribe' || query.verifyToken === undefined || !sameSecret(query.verifyToken, ours))
    return refuse(deps, 'invalid_verify_token')
  if (query.challenge === undefined || !CHALLENGE.test(query.challenge)) return refuse(deps, 'invalid_verify_token')
  deps.count('whatsapp_cloud', 'subscription_confirmed')
  deps.logger.info('WhatsApp Cloud API webhook subscription verified')
  return query.challenge
}

/**
 * `POST /webhooks/whatsapp-cloud`: `X-Hub-Signature-256` must be `sha256=` and the hex HMAC-SHA256
 * of the raw body under WHATSAPP_CLOUD_APP_SECRET (compared in constant time) before anything is
 * read; then each status is stored like any provider event, and a newly stored failure that says
 * the number cannot get WhatsApp goes to the phone fallback. Nothing is ever suppressed.
 */
export async function receiveWhatsAppCloudWebhook(
  deps: CloudWebhookDeps,
  raw: Buffer,
  signature: string | undefined,
): Promise<WebhookOutcome[]> {
  const secret = deps.whatsappCloud?.appSecret
  if (secret === undefined || signature === undefined) return refuse(deps, 'invalid_signature')
  const expected = `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`
  if (!sameSecret(signature.toLowerCase(), expected)) return refuse(deps, 'invalid_signature')
  let body: unknown
  try {
    body = JSON.parse(raw.toString('utf8'))
  } catch {
    return refuse(deps, 'malformed')
  }
  const now = deps.clock()
  const statuses = whatsAppCloudStatusesFrom(body, now, isChannelUnreachableCode)
  const outcomes: WebhookOutcome[] = []
  for (const { event, unreachable } of statuses) {
    if (event.occurredAt && now.getTime() - event.occurredAt.getTime() > REPLAY_WINDOW_MS) {
      deps.count('whatsapp_cloud', 'ignored')
      outcomes.push('ignored')
      continue
    }
    const stored = await storeEvent(deps, 'whatsapp_cloud', 'whatsapp', event)
    outcomes.push(stored.outcome)
    // Once per status: a replay is a duplicate and must not send the code twice.
    if (unreachable && stored.outcome === 'stored' && stored.messageId && deps.onChannelUnreachable)
      // The event is stored whatever the fallback does: Meta's retry would be a duplicate, so a failure is logged, not answered 5xx.
      await deps.onChannelUnreachable(stored.messageId).catch((error: unknown) =>
        deps.logger.error('phone fallback after a WhatsApp failure status failed', {
          messageId: stored.messageId,
          ...describeError(error),
        }),
      )
  }
  if (outcomes.length === 0) {
    deps.count('whatsapp_cloud', 'ignored')
    return ['ignored']
  }
  return outcomes
}
