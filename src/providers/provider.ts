import type { Channel, FailureClass, ProviderId } from '../outbox/constants.ts'
import { SealpostError } from '../errors/sealpost-error.ts'
import { FAULTS, type FailureEffect, type Fault } from './faults.ts'

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
  /** The message's locale (a WhatsApp template is chosen per language). */
  locale?: string
  /**
   * The one-time code alone, for code purposes only: a WhatsApp authentication template takes
   * the code as its parameters, not our rendered text. Held in memory like `text`.
   */
  code?: string
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
  /** What the failure does beyond its class (see `FailureEffect`); null for most failures. */
  readonly effect: FailureEffect | null
  /** The row of the fault table (src/providers/faults.ts) a connector classified it as; null for a worker's own. */
  readonly fault: Fault | null
  constructor(
    failureClass: FailureClass,
    providerCode: string,
    retryAfterAt: Date | null = null,
    recipientOnly = false,
    effect: FailureEffect | null = null,
    fault: Fault | null = null,
  ) {
    super(`delivery failed: ${failureClass}`)
    this.failureClass = failureClass
    this.providerCode = providerCode
    this.retryAfterAt = retryAfterAt
    this.recipientOnly = recipientOnly
    this.effect = effect
    this.fault = fault
  }
}

/** A classified failure of one send: the row's outcome, the provider's own code (for logs), its retry hint. */
export function providerFault(fault: Fault, providerCode: string, retryAfterAt: Date | null = null): DeliveryFailureError {
  const { failureClass, effect, recipientOnly } = FAULTS[fault]
  return new DeliveryFailureError(failureClass, providerCode, retryAfterAt, recipientOnly, effect, fault)
}
