import type { Fault, FaultAnswers } from '../faults.ts'

/**
 * What an SMTP relay answers in each case of the fault table, as RFC 5321 and RFC 3463 word it
 * (docs/delivery.md "Fault table"). SMTP carries no Retry-After: its throttles keep no hint.
 */
export const FAULT_ANSWERS: FaultAnswers = {
  malformed: '554 5.6.0 to the message (after the body)',
  unauthorized: '535 5.7.8 to AUTH (credentials refused)',
  forbidden: '530 5.7.0 to MAIL FROM (authentication required)',
  not_found: '550 5.1.8 to MAIL FROM (our sender is unknown to the relay)',
  too_large: '552 5.3.4 to the message',
  throttled: '421 4.7.0 greeting (try again later)',
  throttled_seconds: '452 4.5.3 to RCPT TO (no Retry-After in SMTP)',
  throttled_date: '452 4.5.3 to RCPT TO (no Retry-After in SMTP)',
  server_error: '451 4.3.0 to the message (local error in processing)',
  bad_gateway: '421 4.3.2 greeting (service not available)',
  unavailable: '450 4.3.2 to MAIL FROM (system not accepting messages)',
  gateway_timeout: 'no gateway in SMTP: the reply to the message is lost (as the reset)',
  refused: 'nothing listens at `SMTP_URL`',
  timeout_before: 'no greeting ever comes',
  timeout_after: 'the reply to the message never comes',
  reset: 'the connection drops after the message',
  recipient_refused: '550 5.1.1 to RCPT TO',
  not_on_channel: undefined,
  unreadable_success: 'a reply to the message that is no SMTP reply',
}

/** The fields of a nodemailer error we read; its message and `response` echo the server's text and are never copied. */
type SmtpError = { name?: string; code?: string; responseCode?: number; command?: string; response?: string }

/** The class and subject of a reply's RFC 3463 enhanced status code (`4.7.0` → [4, 7]); undefined without one. */
function enhancedOf(response: string | undefined): [number, number] | undefined {
  const match = /^\d{3}[ -](\d)\.(\d{1,3})\.\d{1,3}\b/.exec(response ?? '')
  return match ? [Number(match[1]), Number(match[2])] : undefined
}

/**
 * Whether a 4xx reply to RCPT TO is about the recipient alone (RFC 3463 subjects X.1 address and
 * X.2 mailbox status; without an enhanced code, 450 "mailbox unavailable"), not the relay (421,
 * 451 "local error", 4.3.x system, 4.4.x network, 4.7.x policy). Only the reply's codes are read.
 */
function recipientDeferral(responseCode: number, response: string | undefined): boolean {
  if (responseCode < 400 || responseCode >= 500 || responseCode === 421) return false
  const enhanced = enhancedOf(response)
  return enhanced ? enhanced[0] === 4 && (enhanced[1] === 1 || enhanced[1] === 2) : responseCode === 450
}

/** A relay's throttle: 452 (insufficient resources, too many recipients) or 421 with a policy code (4.7.x: try again later). */
function throttle(responseCode: number, response: string | undefined): boolean {
  return responseCode === 452 || (responseCode === 421 && enhancedOf(response)?.[1] === 7)
}

const AUTH_CODES = new Set(['EAUTH', 'ENOAUTH'])

/**
 * Maps a nodemailer SMTP error to its row of the fault table as RFC 5321 reads it
 * (docs/deliverability.md, "Choosing an SMTP relay"); `bodySent` says whether the message had
 * started going out after the server's 354, after which a lost connection may hide an acceptance.
 * Pure, table-tested.
 */
export function classifySmtpError(error: unknown, bodySent: boolean): { fault: Fault; providerCode: string } {
  const { name, code, responseCode, command, response } = (error ?? {}) as SmtpError
  // Our credentials or our TLS set-up: the relay is unusable to us, the person is not at fault.
  if (code && AUTH_CODES.has(code)) return { fault: 'provider_misconfigured', providerCode: 'smtp_auth' }
  if (code === 'ETLS') return { fault: 'provider_misconfigured', providerCode: 'ETLS' }
  if (typeof responseCode === 'number' && responseCode >= 400 && responseCode < 600) {
    const providerCode = `smtp_${responseCode}`
    // A deferral of this recipient alone (a domain the relay cannot verify now, a busy or full
    // mailbox, 452 4.2.2 included) is retried but is never the relay's outage nor a reason to pause
    // the channel, or a stranger's addresses would hold email up for everyone.
    if (command === 'RCPT TO' && recipientDeferral(responseCode, response)) return { fault: 'recipient_deferred', providerCode }
    if (throttle(responseCode, response)) return { fault: 'throttled', providerCode }
    if (responseCode < 500) return { fault: 'unavailable', providerCode }
    // A permanent refusal of this recipient, or of this message, is theirs, not the relay's.
    if (command === 'RCPT TO') return { fault: 'recipient_refused', providerCode }
    if (command === 'DATA') return { fault: 'request_refused', providerCode }
    // 5xx to the greeting, EHLO or MAIL FROM (our sender, our authentication): the relay will not take mail from us.
    return { fault: 'provider_misconfigured', providerCode }
  }
  return { fault: bodySent ? 'indeterminate' : 'unavailable', providerCode: code ?? name ?? 'unknown' }
}
