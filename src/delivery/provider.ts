import type { Channel, FailureClass, ProviderId } from '../outbox/constants.ts'
import { SealpostError } from '../errors/sealpost-error.ts'

/** What a connector is asked to deliver; the text holds the secret and lives in memory only. */
export type OutgoingMessage = {
  messageId: string
  destination: string
  subject: string
  text: string
  /** Email only: the HTML alternative of `text`. */
  html?: string
  /** Email only: sent as the SES `purpose` tag, so events can be counted per purpose. */
  purpose?: string
}

/**
 * A provider port (Kratos courier's shape): an id and one dispatch call. The id is one of the
 * names attempt rows and the outage hold may hold (a CHECK refuses any other, so a new provider
 * comes with its migration).
 */
export interface Provider {
  readonly id: ProviderId
  readonly channel: Channel
  /** Resolves with the provider's message id once accepted; rejects with a DeliveryFailureError. */
  dispatch(message: OutgoingMessage, signal: AbortSignal): Promise<{ providerMessageId: string }>
}

/**
 * A classified provider failure. Its message is fixed text: connectors never copy a provider's
 * error text (it may echo the destination) into it.
 */
export class DeliveryFailureError extends SealpostError {
  override name = 'DeliveryFailureError'
  readonly failureClass: FailureClass
  readonly retryAfterAt: Date | null
  readonly providerCode: string
  /**
   * The answer is about this recipient, not the provider (an SMTP relay's 4xx to RCPT TO): the
   * message retries, but the fleet-wide outage hold never counts it, or a stranger's addresses
   * could hold the provider down for everyone.
   */
  readonly recipientOnly: boolean
  constructor(failureClass: FailureClass, providerCode: string, retryAfterAt: Date | null = null, recipientOnly = false) {
    super(`delivery failed: ${failureClass}`)
    this.failureClass = failureClass
    this.providerCode = providerCode
    this.retryAfterAt = retryAfterAt
    this.recipientOnly = recipientOnly
  }
}
