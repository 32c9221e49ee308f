import { verify as verifySignature, X509Certificate } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { request } from 'undici'
import { SealpostError } from '../../errors/sealpost-error.ts'

/** The fields of an Amazon SNS HTTP(S) delivery this project reads (all strings, as SNS sends them). */
export type SnsEnvelope = {
  Type: string
  MessageId: string
  TopicArn: string
  Message: string
  Timestamp: string
  SignatureVersion: string
  Signature: string
  SigningCertURL: string
  Subject?: string
  SubscribeURL?: string
  Token?: string
}

/** Why an SNS delivery was refused: each is a metric label and a problem code. */
export type SnsRefusal =
  | 'malformed'
  | 'unknown_topic'
  | 'invalid_certificate_url'
  | 'invalid_subscribe_url'
  | 'invalid_signature'
  | 'stale_message'
  | 'certificate_unavailable'

export class SnsRefusedError extends SealpostError {
  override name = 'SnsRefusedError'
  readonly reason: SnsRefusal
  constructor(reason: SnsRefusal) {
    super(`SNS delivery refused: ${reason}`)
    this.reason = reason
  }
}

const MAX_CLOCK_SKEW_MS = 300_000
/**
 * SNS messages older than this are replays as far as we are concerned: SNS's longest HTTP(S)
 * delivery policy retries for up to 3 600 s after publishing, and our clock may be ahead of AWS's
 * (docs/delivery.md "Delivery feedback"). A replay inside the window is a duplicate event, stored once.
 */
export const SNS_MAX_AGE_MS = 3_600_000 + MAX_CLOCK_SKEW_MS

const NOTIFICATION_FIELDS = ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type'] as const
const CONFIRMATION_FIELDS = ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'] as const

/**
 * The string SNS signs (AWS SNS developer guide, "Verifying the signatures of Amazon SNS
 * messages"): for each field present, in this order, its name, a newline, its value, a newline.
 * Notifications sign Message, MessageId, Subject (only when present), Timestamp, TopicArn, Type;
 * (un)subscription confirmations sign Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn, Type.
 */
export function snsStringToSign(envelope: SnsEnvelope): string {
  const fields = envelope.Type === 'Notification' ? NOTIFICATION_FIELDS : CONFIRMATION_FIELDS
  return fields
    .filter((field) => envelope[field] !== undefined)
    .map((field) => `${field}\n${envelope[field]}\n`)
    .join('')
}

/** The region of a topic ARN (`arn:aws:sns:<region>:<account>:<name>`), or undefined. */
export function topicRegion(topicArn: string): string | undefined {
  return /^arn:aws:sns:([a-z0-9-]+):\d{12}:[A-Za-z0-9_-]{1,256}$/.exec(topicArn)?.[1]
}

/** True only for `https://sns.<region>.amazonaws.com/…` with nothing unusual in the URL (no port, no credentials). */
export function isSnsUrl(text: string | undefined, region: string, pathPattern: RegExp): boolean {
  if (!text) return false
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return false
  }
  return (
    url.protocol === 'https:' &&
    url.hostname === `sns.${region}.amazonaws.com` &&
    url.port === '' &&
    url.username === '' &&
    url.password === '' &&
    pathPattern.test(url.pathname)
  )
}

const CERT_PATH = /^\/[A-Za-z0-9_-]+\.pem$/

/** Where signing certificates come from: an HTTPS fetch, or in tests a local PEM file. */
export type CertificateSource = (url: string) => Promise<X509Certificate>

/** GETs a PEM over HTTPS, bounded in time and size; undici follows no redirects, so it comes from that host or not at all. */
async function fetchPem(url: string, timeoutMs: number): Promise<string> {
  const response = await request(url, { method: 'GET', signal: AbortSignal.timeout(timeoutMs) })
  if (response.statusCode !== 200) {
    await response.body.dump()
    throw new Error(`certificate fetch answered ${response.statusCode}`)
  }
  const pem = await response.body.text()
  if (pem.length > 16_384) throw new Error('certificate too large')
  return pem
}

/**
 * Certificates fetched once per URL and kept (SNS uses a handful). A failed fetch is kept for a
 * minute, and at most `newUrlsPerMinute` URLs never seen before are fetched a minute, so forged
 * deliveries naming made-up certificate files on the SNS host cannot make the web fetch at will.
 */
export function fetchedCertificates(
  options: {
    timeoutMs?: number
    maxEntries?: number
    newUrlsPerMinute?: number
    fetch?: (url: string) => Promise<string>
    clock?: () => Date
  } = {},
): CertificateSource {
  const cache = new Map<string, Promise<X509Certificate>>()
  const clock = options.clock ?? (() => new Date())
  const fetchOne = options.fetch ?? ((url: string) => fetchPem(url, options.timeoutMs ?? 5_000))
  let window = { startedAt: 0, fetches: 0 }
  return (url) => {
    const cached = cache.get(url)
    if (cached) return cached
    const now = clock().getTime()
    if (now - window.startedAt >= 60_000) window = { startedAt: now, fetches: 0 }
    if (window.fetches >= (options.newUrlsPerMinute ?? 10)) return Promise.reject(new Error('too many new certificate URLs this minute'))
    window.fetches += 1
    const loading = fetchOne(url).then((pem) => new X509Certificate(pem))
    loading.catch(() => setTimeout(() => cache.delete(url), 60_000).unref())
    if (cache.size >= (options.maxEntries ?? 32)) cache.delete(cache.keys().next().value!)
    cache.set(url, loading)
    return loading
  }
}

/** SNS_TEST_SIGNING_CERT: every (well-formed, SNS-hosted) certificate URL resolves to this one file. */
export function fileCertificate(path: string): CertificateSource {
  let loaded: Promise<X509Certificate> | undefined
  return () => (loaded ??= readFile(path, 'utf8').then((pem) => new X509Certificate(pem)))
}

/** Reads a JSON body into an envelope, or refuses it as malformed. */
export function parseSnsEnvelope(body: string, messageTypeHeader: string | undefined): SnsEnvelope {
  let value: unknown
  try {
    value = JSON.parse(body)
  } catch {
    throw new SnsRefusedError('malformed')
  }
  const record = (value ?? {}) as Record<string, unknown>
  const required = ['Type', 'MessageId', 'TopicArn', 'Message', 'Timestamp', 'SignatureVersion', 'Signature', 'SigningCertURL']
  const optional = ['Subject', 'SubscribeURL', 'Token']
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new SnsRefusedError('malformed')
  if (
    required.some((key) => typeof record[key] !== 'string') ||
    optional.some((key) => record[key] !== undefined && typeof record[key] !== 'string')
  )
    throw new SnsRefusedError('malformed')
  // SNS names the type in a header too; a body that disagrees with it was not sent as it is.
  if (messageTypeHeader !== undefined && messageTypeHeader !== record.Type) throw new SnsRefusedError('malformed')
  return record as SnsEnvelope
}

/**
 * Checks an SNS delivery: the topic is ours, the certificate URL is SNS's own host in the topic's
 * region, the signature (SignatureVersion 1: SHA1withRSA, 2: SHA256withRSA) verifies against that
 * certificate, the certificate is within its validity, and the message is within SNS's retry window.
 */
export async function verifySnsEnvelope(
  envelope: SnsEnvelope,
  options: { topicArn: string; certificates: CertificateSource; now: Date },
): Promise<void> {
  const region = topicRegion(envelope.TopicArn)
  if (envelope.TopicArn !== options.topicArn || !region) throw new SnsRefusedError('unknown_topic')
  if (!isSnsUrl(envelope.SigningCertURL, region, CERT_PATH)) throw new SnsRefusedError('invalid_certificate_url')
  const algorithm = envelope.SignatureVersion === '1' ? 'sha1' : envelope.SignatureVersion === '2' ? 'sha256' : undefined
  if (!algorithm) throw new SnsRefusedError('invalid_signature')
  let certificate: X509Certificate
  try {
    certificate = await options.certificates(envelope.SigningCertURL)
  } catch {
    throw new SnsRefusedError('certificate_unavailable')
  }
  const now = options.now.getTime()
  if (Date.parse(certificate.validFrom) > now || Date.parse(certificate.validTo) < now) throw new SnsRefusedError('invalid_signature')
  const signature = Buffer.from(envelope.Signature, 'base64')
  let valid: boolean
  try {
    valid = verifySignature(algorithm, Buffer.from(snsStringToSign(envelope), 'utf8'), certificate.publicKey, signature)
  } catch {
    // A key the certificate holds that cannot verify this (not RSA, a malformed signature).
    valid = false
  }
  if (!valid) throw new SnsRefusedError('invalid_signature')
  const sentAt = Date.parse(envelope.Timestamp)
  if (Number.isNaN(sentAt) || now - sentAt > SNS_MAX_AGE_MS || sentAt - now > MAX_CLOCK_SKEW_MS) throw new SnsRefusedError('stale_message')
}

/** A SubscriptionConfirmation's SubscribeURL must be SNS's own ConfirmSubscription endpoint for the topic's region. */
export function assertSubscribeUrl(envelope: SnsEnvelope): string {
  const region = topicRegion(envelope.TopicArn)!
  if (!isSnsUrl(envelope.SubscribeURL, region, /^\/?$/)) throw new SnsRefusedError('invalid_subscribe_url')
  const url = new URL(envelope.SubscribeURL!)
  if (url.searchParams.get('Action') !== 'ConfirmSubscription' || url.searchParams.get('TopicArn') !== envelope.TopicArn)
    throw new SnsRefusedError('invalid_subscribe_url')
  return url.toString()
}
