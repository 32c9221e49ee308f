import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net'
import { delay, startFakeHttp, type FakeHttpServer } from '../fake-http.ts'
import { twilioSignature } from './signature.ts'
import type { PhoneInbox } from '../phone-inbox.ts'

/** What the fake answers to one Messages request that passed its checks. */
export type TwilioBehavior =
  | { kind: 'accept'; delayMs?: number }
  /** Twilio's error answer: `{code, message, more_info, status}` (`code` omitted: no body at all, as a proxy's 5xx). */
  | { kind: 'error'; status: number; code?: number; headers?: Record<string, string> }
  /** Takes the message on, then never answers: Twilio acted, the caller cannot know. */
  | { kind: 'accept-then-hang' }
  | { kind: 'hang' }
  | { kind: 'reset' }
  | { kind: 'garbage' }

/** One Messages request as the fake read it; `sid` once accepted. Development and tests only: it holds the text. */
export type TwilioRequest = {
  to: string
  body: string
  /** The same as `body`, under the name the other phone fakes use (the bench reads either). */
  text: string
  from: string | undefined
  messagingServiceSid: string | undefined
  statusCallback: string | undefined
  authorization: string | undefined
  at: number
  /** When the answer to it was finished (the bench measures the provider's share of a send). */
  finishedAt?: number
  accepted: boolean
  sid?: string
}

/** A status callback as Twilio would post it: where, what, and its `X-Twilio-Signature`. */
export type TwilioCallback = { url: string; params: [string, string][]; signature: string }

const API_VERSION = '2010-04-01'
const hex = (bytes: number) => randomBytes(bytes).toString('hex')

/** Twilio's error body; its message echoes the number, as Twilio's own do (the connector must never copy it). */
function errorBody(status: number, code: number, to: string): string {
  return JSON.stringify({
    code,
    message: `The 'To' number ${to} failed with error ${code}.`,
    more_info: `https://www.twilio.com/docs/errors/${code}`,
    status,
  })
}

type FakeTwilioOptions = {
  accountSid: string
  authToken: string
  apiKey?: { sid: string; secret: string }
  inbox?: PhoneInbox
  /** Post `sent` then `delivered` to every accepted message's StatusCallback (development). */
  autoDeliver?: boolean
  port?: number
}

/** One Messages request's form, as the fake records it. */
function readMessage(req: IncomingMessage, raw: Buffer): TwilioRequest {
  const form = new URLSearchParams(raw.toString('utf8'))
  const body = form.get('Body') ?? ''
  return {
    to: form.get('To') ?? '',
    body,
    text: body,
    from: form.get('From') ?? undefined,
    messagingServiceSid: form.get('MessagingServiceSid') ?? undefined,
    statusCallback: form.get('StatusCallback') ?? undefined,
    authorization: req.headers.authorization,
    at: Date.now(),
    accepted: false,
  }
}

/** Twilio's refusal of a request that lacks what every message needs: its error code, or undefined. */
function missingParameter(entry: TwilioRequest): number | undefined {
  if (!entry.to) return 21604
  if (!entry.body) return 21602
  if (!entry.from && !entry.messagingServiceSid) return 21603
  return undefined
}

/** The Message resource Twilio answers an accepted send with. */
const resourceOf = (entry: TwilioRequest, accountSid: string) => ({
  sid: entry.sid,
  account_sid: accountSid,
  messaging_service_sid: entry.messagingServiceSid ?? null,
  from: entry.from ?? null,
  to: entry.to,
  body: entry.body,
  status: 'queued',
  direction: 'outbound-api',
  num_segments: '1',
  api_version: API_VERSION,
  error_code: null,
  error_message: null,
  date_created: new Date().toUTCString(),
  uri: `/${API_VERSION}/Accounts/${accountSid}/Messages/${entry.sid}.json`,
})

/** The callback Twilio would post for message `sid` reaching `status` (with `errorCode` for undelivered / failed). */
function callbackOf(
  entry: TwilioRequest | undefined,
  sid: string,
  options: FakeTwilioOptions,
  status: string,
  errorCode?: number,
): TwilioCallback {
  if (!entry?.statusCallback) throw new Error(`no accepted message ${sid} with a StatusCallback`)
  const params: [string, string][] = [
    ['AccountSid', options.accountSid],
    ['ApiVersion', API_VERSION],
    ['MessageSid', sid],
    ['MessageStatus', status],
    ['SmsSid', sid],
    ['SmsStatus', status],
    ['To', entry.to],
    ...(entry.from ? [['From', entry.from] as [string, string]] : []),
    ...(entry.messagingServiceSid ? [['MessagingServiceSid', entry.messagingServiceSid] as [string, string]] : []),
    ...(errorCode === undefined ? [] : [['ErrorCode', String(errorCode)] as [string, string]]),
  ]
  return { url: entry.statusCallback, params, signature: twilioSignature(options.authToken, entry.statusCallback, params) }
}

/**
 * Posts a status callback. `via`: the origin that actually receives it when the StatusCallback's
 * public origin is a proxy in front of it (tests); the signature still covers the public URL.
 */
async function postCallback(callback: TwilioCallback, via?: string) {
  const target = via ? new URL(new URL(callback.url).pathname, via).toString() : callback.url
  const response = await fetch(target, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': callback.signature },
    body: new URLSearchParams(callback.params).toString(),
    signal: AbortSignal.timeout(5_000),
  })
  return { status: response.status, body: await response.json().catch((): unknown => undefined) }
}

/** An https address whose TLS handshake never completes: it accepts TCP and never says a word, so a client never writes its request. */
async function startStalledTls() {
  const sockets = new Set<Socket>()
  const stalled = createTcpServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => undefined).on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve))
  return {
    url: `https://127.0.0.1:${(stalled.address() as AddressInfo).port}`,
    async stop() {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => stalled.close(() => resolve()))
    },
  }
}

const answer = (res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(body)

/** One send as the fake answers it: where it came from and went, and how the message is taken on. */
type SendContext = { req: IncomingMessage; res: ServerResponse; server: FakeHttpServer; take: () => void; accountSid: string }

/** Answers a send that passed every check as `behavior` says. */
async function answerSend(behavior: TwilioBehavior, entry: TwilioRequest, { req, res, server, take, accountSid }: SendContext) {
  switch (behavior.kind) {
    case 'accept':
      await delay(behavior.delayMs)
      take()
      return answer(res, 201, JSON.stringify(resourceOf(entry, accountSid)))
    case 'error':
      return answer(
        res,
        behavior.status,
        behavior.code === undefined ? '' : errorBody(behavior.status, behavior.code, entry.to),
        behavior.headers,
      )
    case 'accept-then-hang':
    case 'hang':
    case 'reset':
      return server.fault(behavior.kind, req, res, take)
    case 'garbage':
      return answer(res, 201, '<html>maintenance</html>')
  }
}

/**
 * A local Twilio speaking the Messages resource (`POST /2010-04-01/Accounts/{sid}/Messages.json`,
 * form body, basic auth with the account's auth token or an API key) that fails on demand through
 * `behave` and `failNumber`, records what it took on into `inbox`, and posts status callbacks
 * to each message's StatusCallback signed as Twilio signs them (`sendStatus`; `autoDeliver` posts
 * `sent` then `delivered` on its own, for `npm start`). `stalledTlsUrl` is an https address whose
 * TLS handshake never completes: a send there times out before its request was written.
 * One module for the tests and `npm start`.
 */
export async function startFakeTwilio(options: FakeTwilioOptions) {
  const requests: TwilioRequest[] = []
  const failingNumbers = new Map<string, number>()
  let behave: (call: number, request: TwilioRequest) => TwilioBehavior = () => ({ kind: 'accept' })
  const path = `/${API_VERSION}/Accounts/${options.accountSid}/Messages.json`
  const credentials = [
    `${options.accountSid}:${options.authToken}`,
    ...(options.apiKey ? [`${options.apiKey.sid}:${options.apiKey.secret}`] : []),
  ].map((pair) => `Basic ${Buffer.from(pair).toString('base64')}`)

  const statusCallback = (sid: string, status: string, errorCode?: number): TwilioCallback =>
    callbackOf(
      requests.find((request) => request.sid === sid),
      sid,
      options,
      status,
      errorCode,
    )
  const sendStatus = async (sid: string, status: string, extra: { errorCode?: number; via?: string } = {}) =>
    await postCallback(statusCallback(sid, status, extra.errorCode), extra.via)

  const take = (entry: TwilioRequest) => {
    entry.accepted = true
    entry.sid = `SM${hex(16)}`
    options.inbox?.record({ provider: 'twilio', to: entry.to, text: entry.body, providerMessageId: entry.sid, at: new Date() })
    const sid = entry.sid
    if (options.autoDeliver && entry.statusCallback)
      setTimeout(
        () =>
          void sendStatus(sid, 'sent')
            .then(() => sendStatus(sid, 'delivered'))
            .catch(() => undefined),
        200,
      ).unref()
  }

  const server = await startFakeHttp(async (req, res, raw) => {
    if (!credentials.includes(req.headers.authorization ?? '')) return answer(res, 401, errorBody(401, 20003, ''))
    if (req.method !== 'POST' || req.url !== path) return answer(res, 404, errorBody(404, 20404, ''))
    const entry = readMessage(req, raw)
    requests.push(entry)
    res.once('close', () => (entry.finishedAt = Date.now()))
    const refusal = missingParameter(entry) ?? failingNumbers.get(entry.to)
    if (refusal !== undefined) return answer(res, 400, errorBody(400, refusal, entry.to))
    await answerSend(behave(requests.length, entry), entry, { req, res, server, take: () => take(entry), accountSid: options.accountSid })
  }, options.port)
  const stalled = await startStalledTls()

  return {
    url: server.url,
    stalledTlsUrl: stalled.url,
    requests,
    /** Messages Twilio took on: what a person would receive. */
    accepted: () => requests.filter((request) => request.accepted),
    behave(next: typeof behave) {
      behave = next
    },
    /** Every send to `to` is refused with Twilio error `code` (400), as Twilio refuses an invalid or unsubscribed number. */
    failNumber(to: string, code: number) {
      failingNumbers.set(to, code)
    },
    statusCallback,
    sendStatus,
    async stop() {
      await Promise.all([server.stop(), stalled.stop()])
    },
  }
}

export type FakeTwilio = Awaited<ReturnType<typeof startFakeTwilio>>
