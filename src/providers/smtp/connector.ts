import type { Readable } from 'node:stream'
import nodemailer from 'nodemailer'
import { DeliveryFailureError, providerFault, type OutgoingMessage, type Provider } from '../provider.ts'
import { classifySmtpError } from './faults.ts'

export type SmtpSettings = {
  /** SMTP_URL: `smtps://` is implicit TLS; `smtp://` upgrades with STARTTLS, required unless `allowPlain`. */
  url: string
  fromAddress: string
  fromName?: string
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
 * URL, the destination or the server's reply text reaches an error or a log line; the replies map
 * to the fault table in faults.ts.
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
        if (!providerMessageId) throw providerFault('indeterminate', 'MissingMessageId')
        return { providerMessageId }
      } catch (error) {
        if (error instanceof DeliveryFailureError) throw error
        const bodySent = watch.stream?.readableDidRead === true
        if (signal.aborted) throw providerFault(bodySent ? 'indeterminate' : 'unavailable', 'Timeout')
        const { fault, providerCode } = classifySmtpError(error, bodySent)
        throw providerFault(fault, providerCode)
      }
    },
    close: () => transport.close(),
  }
}
