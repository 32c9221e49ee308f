import type { Readable } from 'node:stream'
import nodemailer from 'nodemailer'
import type { Logger } from '../../logging/logger.ts'
import type { FailureClass } from '../../outbox/constants.ts'
import { DeliveryFailureError, type OutgoingMessage, type Provider } from '../provider.ts'

/** `recipientOnly`: a temporary refusal of this recipient, which says nothing about the relay (the outage hold ignores it). */
type Classified = { failureClass: FailureClass; providerCode: string; recipientOnly?: true }

/** The fields of a nodemailer error we read; its message and `response` echo the server's text and are never copied. */
type SmtpError = { name?: string; code?: string; responseCode?: number; command?: string; response?: string }

/**
 * Whether a 4xx reply to RCPT TO is about the recipient alone (RFC 3463 classes X.1 address and
 * X.2 mailbox status; without an enhanced code, 450 "mailbox unavailable"), not the relay (421,
 * 451 "local error", 4.3.x system, 4.4.x network, 4.7.x policy). Only the reply's codes are read.
 */
function recipientDeferral(responseCode: number, response: string | undefined): boolean {
  if (responseCode < 400 || responseCode >= 500 || responseCode === 421) return false
  const enhanced = /^\d{3}[ -](\d)\.(\d{1,3})\.\d{1,3}\b/.exec(response ?? '')
  return enhanced ? enhanced[1] === '4' && (enhanced[2] === '1' || enhanced[2] === '2') : responseCode === 450
}

const AUTH_CODES = new Set(['EAUTH', 'ENOAUTH'])

/**
 * Maps a nodemailer SMTP error to our taxonomy as RFC 5321 reads it (docs/deliverability.md,
 * "Choosing an SMTP relay"); `bodySent` says whether the message had started going out after the
 * server's 354, after which a lost connection may hide an acceptance. Pure, table-tested.
 */
export function classifySmtpError(error: unknown, bodySent: boolean): Classified {
  const { name, code, responseCode, command, response } = (error ?? {}) as SmtpError
  // Our credentials or our TLS set-up: the relay is unusable to us, the person is not at fault.
  if (code && AUTH_CODES.has(code)) return { failureClass: 'UNAVAILABLE', providerCode: 'smtp_auth' }
  if (code === 'ETLS') return { failureClass: 'UNAVAILABLE', providerCode: 'ETLS' }
  if (typeof responseCode === 'number' && responseCode >= 400 && responseCode < 600) {
    const providerCode = `smtp_${responseCode}`
    // A deferral of this recipient alone (a domain the relay cannot verify now, a busy or full
    // mailbox, 452 4.2.2 included) is retried but is never the relay's outage nor a reason to pause
    // the channel, or a stranger's addresses would hold email up for everyone.
    if (command === 'RCPT TO' && recipientDeferral(responseCode, response))
      return { failureClass: 'UNAVAILABLE', providerCode, recipientOnly: true }
    if (responseCode === 452) return { failureClass: 'THROTTLED', providerCode }
    if (responseCode < 500) return { failureClass: 'UNAVAILABLE', providerCode }
    // A permanent refusal of this recipient or of this message is the person's address, not the relay.
    if (command === 'RCPT TO' || command === 'DATA') return { failureClass: 'REJECTED', providerCode }
    // 5xx to the greeting, EHLO or MAIL FROM (our sender): the relay will not take mail from us.
    return { failureClass: 'UNAVAILABLE', providerCode }
  }
  const providerCode = code ?? name ?? 'unknown'
  return { failureClass: bodySent ? 'INDETERMINATE' : 'UNAVAILABLE', providerCode }
}

export type SmtpSettings = {
  /** SMTP_URL: `smtps://` is implicit TLS; `smtp://` upgrades with STARTTLS, required unless `allowPlain`. */
  url: string
  fromAddress: string
  fromName?: string
  logger: Logger
  /** SEND_TIMEOUT_MS: bounds the connection, the greeting and every wait for a reply. */
  timeoutMs: number
  /** Connections at most (WORKER_CONCURRENCY); further sends wait for one. */
  concurrency?: number
  /** Plain SMTP when the server offers no STARTTLS: config allows it only to loopback outside staging and production. */
  allowPlain?: boolean
  /** Trusted CAs besides the system's (a private relay, tests); verification itself is never turned off. */
  tls?: { ca?: string | Buffer }
}

/** What one dispatch learns from inside nodemailer: the message stream, once it was created. */
type Watch = { stream?: Readable }

/**
 * Email through an SMTP relay over a pool of connections: subject, text and an HTML alternative,
 * From `"<name>" <address>`, one recipient. Credentials stay inside the transport: nothing of the
 * URL, the destination or the server's reply text reaches an error or a log line.
 */
export function createSmtpConnector(settings: SmtpSettings): Provider & { close(): void } {
  const url = new URL(settings.url)
  const secure = url.protocol === 'smtps:'
  const transport = nodemailer.createTransport({
    pool: true,
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port ? Number(url.port) : secure ? 465 : 587,
    secure,
    requireTLS: !secure && !settings.allowPlain,
    ...(url.username ? { auth: { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } } : {}),
    tls: { minVersion: 'TLSv1.2', ...(settings.tls?.ca ? { ca: settings.tls.ca } : {}) },
    maxConnections: Math.max(1, settings.concurrency ?? 5),
    // One more try on a fresh connection when a pooled one was found closed before a byte of the
    // message went out; a relay that keeps dropping us is the outbox's to retry, on its schedule.
    maxRequeues: 1,
    connectionTimeout: settings.timeoutMs,
    greetingTimeout: settings.timeoutMs,
    socketTimeout: settings.timeoutMs,
    // Nodemailer's own logs name recipients and replay server replies: off.
    logger: false,
    debug: false,
    disableFileAccess: true,
    disableUrlAccess: true,
  })
  // Keyed by the per-dispatch signal nodemailer carries on each mail.
  const watches = new WeakMap<AbortSignal, Watch>()
  transport.use('stream', (mail, done) => {
    const watch = mail.data.signal ? watches.get(mail.data.signal) : undefined
    mail.message.processFunc((input) => {
      // The pool reads this stream only once the server has answered DATA with 354 (and reads a new one on a requeue).
      if (watch) watch.stream = input
      return input
    })
    done()
  })
  let misconfigurationLogged = false

  return {
    id: 'smtp',
    channel: 'email',
    async dispatch(message: OutgoingMessage, signal: AbortSignal) {
      const own = AbortSignal.any([signal])
      const watch: Watch = {}
      watches.set(own, watch)
      try {
        const info = await transport.sendMail({
          from: settings.fromName ? { name: settings.fromName, address: settings.fromAddress } : settings.fromAddress,
          to: message.destination,
          subject: message.subject,
          text: message.text,
          ...(message.html ? { html: message.html } : {}),
          signal: own,
        })
        const providerMessageId = info.messageId?.replace(/^<|>$/g, '')
        if (!providerMessageId) throw new DeliveryFailureError('INDETERMINATE', 'MissingMessageId')
        return { providerMessageId }
      } catch (error) {
        if (error instanceof DeliveryFailureError) throw error
        const bodySent = watch.stream?.readableDidRead === true
        if (signal.aborted) throw new DeliveryFailureError(bodySent ? 'INDETERMINATE' : 'UNAVAILABLE', 'Timeout')
        const { failureClass, providerCode, recipientOnly } = classifySmtpError(error, bodySent)
        if (providerCode === 'smtp_auth' && !misconfigurationLogged) {
          misconfigurationLogged = true
          settings.logger.error('MISCONFIGURATION: the SMTP relay refused our credentials; email through it is failing', {
            provider: 'smtp',
          })
        }
        throw new DeliveryFailureError(failureClass, providerCode, null, recipientOnly === true)
      }
    },
    close: () => transport.close(),
  }
}
