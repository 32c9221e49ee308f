import express, { Router } from 'express'
import { receiveSesWebhook, receiveWasenderWebhook, WebhookRefused, type WebhookDeps } from '../../delivery/webhooks.ts'
import { HttpProblem } from '../problem.ts'

/**
 * Provider delivery events (DESIGN §12). Mounted before the app's JSON parser: SNS posts its JSON
 * as `text/plain`, and its notifications (SES bounces carry the original headers) exceed 16 KiB.
 * Refusals are 4xx, which SNS does not retry; an authentic event for a message we do not know is
 * 200, because retrying it can never help (docs/operations.md).
 */
export function webhookRoutes(deps: WebhookDeps): Router {
  const router = Router()
  const refused = (error: unknown): never => {
    if (error instanceof WebhookRefused) {
      throw new HttpProblem(error.reason === 'malformed' ? 400 : error.reason === 'certificate_unavailable' ? 503 : 403, error.reason, 'The webhook delivery was refused.', error.reason === 'certificate_unavailable' ? { headers: { 'Retry-After': '30' } } : {})
    }
    throw error
  }

  router.post('/webhooks/ses', express.text({ type: () => true, limit: '256kb' }), async (req, res) => {
    const body = typeof req.body === 'string' ? req.body : ''
    const outcome = await receiveSesWebhook(deps, body, req.get('x-amz-sns-message-type')).catch(refused)
    res.status(200).json({ outcome })
  })

  router.post('/webhooks/wasender', express.json({ type: () => true, limit: '64kb' }), async (req, res) => {
    const outcomes = await receiveWasenderWebhook(deps, req.body, req.get('x-webhook-signature')).catch(refused)
    res.status(200).json({ outcomes })
  })

  return router
}
