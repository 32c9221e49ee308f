import type { FaultCaseId } from '../../../src/providers/faults.ts'
import type { OutgoingMessage, Provider } from '../../../src/providers/provider.ts'
import type { ProviderId } from '../../../src/outbox/constants.ts'

/**
 * One send arranged to meet a case: the connector (fresh when the case needs other settings), its
 * message, its bound, and for a throttle with a hint the moment the provider's `Retry-After` named.
 */
export type Arranged = { provider: Provider; message: OutgoingMessage; timeoutMs: number; hintAt?: Date }

/** A provider's fake, running, able to give each answer of the fault table on demand. */
export type RunningFixture = {
  arrange(id: FaultCaseId): Promise<Arranged>
  stop(): Promise<void>
}

/** How the conformance test drives one provider: through its real fake, never a mock of the connector. */
export type ConformanceFixture = {
  id: ProviderId
  /** Whether its protocol carries a retry hint (Retry-After): SMTP's does not. */
  hints: boolean
  start(): Promise<RunningFixture>
}

/** The bound of a send in the cases that time out; short, since nothing answers anyway. */
export const TIMEOUT_MS = 300

/** The bound of every other send: far above any answer of a local fake. */
export const SEND_MS = 5_000

export const EMAIL: OutgoingMessage = {
  messageId: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f',
  destination: 'person.secret@example.com',
  subject: 'Your code',
  text: 'Your code is 493021',
  purpose: 'sign_up',
}

export const PHONE: OutgoingMessage = {
  messageId: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f',
  destination: '+447700900123',
  subject: '',
  text: 'Your code is 493021',
  purpose: 'sign_up',
  locale: 'en',
  code: '493021',
}

/** A Retry-After for a throttle case: 30 s, or an HTTP date two minutes ahead (whole seconds, as the header carries). */
export function retryAfter(hint: 'seconds' | 'date'): { header: string; at: Date } {
  const now = Date.now()
  if (hint === 'seconds') return { header: '30', at: new Date(now + 30_000) }
  const at = new Date(Math.ceil(now / 1000) * 1000 + 120_000)
  return { header: at.toUTCString(), at }
}
