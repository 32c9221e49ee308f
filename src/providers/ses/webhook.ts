import { request } from 'undici'
import { z } from 'zod'
import { refuseWebhook, storeEvent, WebhookOutcomeSchema, type WebhookDeps, type WebhookOutcome } from '../webhooks.ts'
import { sesEventFrom } from './events.ts'
import { assertSubscribeUrl, parseSnsEnvelope, SnsRefusedError, verifySnsEnvelope, type CertificateSource } from './sns-verifier.ts'

/** SES_EVENTS_TOPIC_ARN and where SNS's signing certificates come from; the SubscribeURL visit is a test seam. */
export type SesWebhookSettings = { topicArn: string; certificates: CertificateSource; confirmSubscription?: (url: string) => Promise<void> }

/** An Amazon SNS HTTP(S) delivery, as the API document describes it. */
export const SnsDelivery = z
  .object({
    Type: z.enum(['Notification', 'SubscriptionConfirmation', 'UnsubscribeConfirmation']),
    MessageId: z.string(),
    TopicArn: z.string(),
    Message: z.string(),
    Timestamp: z.string(),
    SignatureVersion: z.enum(['1', '2']),
    Signature: z.string(),
    SigningCertURL: z.string(),
    Subject: z.string().optional(),
    SubscribeURL: z.string().optional(),
    Token: z.string().optional(),
  })
  .describe('An Amazon SNS HTTP(S) delivery, posted as text/plain JSON with an x-amz-sns-message-type header')
export const SesWebhookAnswer = z.object({ outcome: WebhookOutcomeSchema })

/** Why an SNS delivery may be refused (src/providers/ses/sns-verifier.ts). */
export const SES_REFUSALS = [
  'malformed',
  'invalid_signature',
  'invalid_certificate_url',
  'invalid_subscribe_url',
  'unknown_topic',
  'stale_message',
  'certificate_unavailable',
] as const

/** GETs a SubscribeURL (already checked to be SNS's own ConfirmSubscription endpoint). */
export async function confirmSnsSubscription(url: string): Promise<void> {
  const response = await request(url, { method: 'GET', signal: AbortSignal.timeout(5_000) })
  await response.body.dump()
  if (response.statusCode !== 200) throw new Error(`ConfirmSubscription answered ${response.statusCode}`)
}

/**
 * `POST /webhooks/ses`: an SNS delivery of the SES event topic, verified before anything is read
 * from it (sns-verifier.ts). A SubscriptionConfirmation for our topic is confirmed; a
 * Notification's SES event is stored (or ignored when it is a kind we do not record).
 */
export async function receiveSesWebhook(
  deps: WebhookDeps,
  ses: SesWebhookSettings | undefined,
  body: string,
  messageType: string | undefined,
): Promise<WebhookOutcome> {
  try {
    if (!ses) throw new SnsRefusedError('unknown_topic')
    const envelope = parseSnsEnvelope(body, messageType)
    await verifySnsEnvelope(envelope, { topicArn: ses.topicArn, certificates: ses.certificates, now: deps.clock() })
    if (envelope.Type === 'SubscriptionConfirmation') {
      const url = assertSubscribeUrl(envelope)
      await (ses.confirmSubscription ?? confirmSnsSubscription)(url)
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
    return refuseWebhook(deps, 'ses', 'SES', error.reason)
  }
}
