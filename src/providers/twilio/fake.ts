import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createTcpServer, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
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

/**
 * A local Twilio speaking the Messages resource (`POST /2010-04-01/Accounts/{sid}/Messages.json`,
 * form body, basic auth with the account's auth token or an API key) that fails on demand through
 * `behave` and `failNumber`, records what it took on into `inbox`, and posts status callbacks
 * to each message's StatusCallback signed as Twilio signs them (`sendStatus`; `autoDeliver` posts
 * `sent` then `delivered` on its own, for `npm start`). `stalledTlsUrl` is an https address whose
 * TLS handshake never completes: a send there times out before its request was written.
 * One module for the tests and `npm start`.
 */
export async function startFakeTwilio(options: {
  accountSid: string
  authToken: string
  apiKey?: { sid: string; secret: string }
  inbox?: PhoneInbox
  /** Post `sent` then `delivered` to every accepted message's StatusCallback (development). */
  autoDeliver?: boolean
  port?: number
}) {
  const requests: TwilioRequest[] = []
  const failingNumbers = new Map<string, number>()
  const hanging = new Set<ServerResponse>()
  let behave: (call: number, request: TwilioRequest) => TwilioBehavior = () => ({ kind: 'accept' })
  const path = `/${API_VERSION}/Accounts/${options.accountSid}/Messages.json`
  const credentials = [
    `${options.accountSid}:${options.authToken}`,
    ...(options.apiKey ? [`${options.apiKey.sid}:${options.apiKey.secret}`] : []),
  ].map((pair) => `Basic ${Buffer.from(pair).toString('base64')}`)

  const answer = (res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}) =>
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(body)

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    if (!credentials.includes(req.headers.authorization ?? '')) return answer(res, 401, errorBody(401, 20003, ''))
    if (req.method !== 'POST' || req.url !== path) return answer(res, 404, errorBody(404, 20404, ''))
    const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'))
    const body = form.get('Body') ?? ''
    const entry: TwilioRequest = {
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
    requests.push(entry)
    res.once('close', () => (entry.finishedAt = Date.now()))
    if (!entry.to) return answer(res, 400, errorBody(400, 21604, ''))
    if (!entry.body) return answer(res, 400, errorBody(400, 21602, entry.to))
    if (!entry.from && !entry.messagingServiceSid) return answer(res, 400, errorBody(400, 21603, entry.to))
    const numberCode = failingNumbers.get(entry.to)
    if (numberCode !== undefined) return answer(res, 400, errorBody(400, numberCode, entry.to))
    const behavior = behave(requests.length, entry)
    switch (behavior.kind) {
      case 'accept':
        if (behavior.delayMs) await new Promise((resolve) => setTimeout(resolve, behavior.delayMs))
        take(entry)
        return answer(res, 201, JSON.stringify(resource(entry)))
      case 'error':
        return behavior.code === undefined
          ? answer(res, behavior.status, '', behavior.headers)
          : answer(res, behavior.status, errorBody(behavior.status, behavior.code, entry.to), behavior.headers)
      case 'accept-then-hang':
        take(entry)
        hanging.add(res)
        return
      case 'hang':
        hanging.add(res)
        return
      case 'reset':
        req.socket.destroy()
        return
      case 'garbage':
        return answer(res, 201, '<html>maintenance</html>')
    }
  }

  const take = (entry: TwilioRequest) => {
    entry.accepted = true
    entry.sid = `SM${hex(16)}`
    options.inbox?.record({ provider: 'twilio', to: entry.to, text: entry.body, providerMessageId: entry.sid, at: new Date() })
    if (options.autoDeliver && entry.statusCallback) {
      const sid = entry.sid
      setTimeout(() => {
        void sendStatus(sid, 'sent')
          .then(() => sendStatus(sid, 'delivered'))
          .catch(() => undefined)
      }, 200).unref()
    }
  }

  const resource = (entry: TwilioRequest) => ({
    sid: entry.sid,
    account_sid: options.accountSid,
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
    uri: `/${API_VERSION}/Accounts/${options.accountSid}/Messages/${entry.sid}.json`,
  })

  /** The callback Twilio would post for message `sid` reaching `status` (with `errorCode` for undelivered / failed). */
  function statusCallback(sid: string, status: string, errorCode?: number): TwilioCallback {
    const entry = requests.find((request) => request.sid === sid)
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
  async function sendStatus(sid: string, status: string, extra: { errorCode?: number; via?: string } = {}) {
    const callback = statusCallback(sid, status, extra.errorCode)
    const target = extra.via ? new URL(new URL(callback.url).pathname, extra.via).toString() : callback.url
    const response = await fetch(target, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': callback.signature },
      body: new URLSearchParams(callback.params).toString(),
      signal: AbortSignal.timeout(5_000),
    })
    return { status: response.status, body: await response.json().catch((): unknown => undefined) }
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy())
  })
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  // Accepts TCP and never says a word: a TLS client waits for the server's hello and never writes its request.
  const stalledSockets = new Set<Socket>()
  const stalled = createTcpServer((socket) => {
    stalledSockets.add(socket)
    socket.on('error', () => undefined).on('close', () => stalledSockets.delete(socket))
  })
  await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve))

  return {
    url: `http://127.0.0.1:${port}`,
    stalledTlsUrl: `https://127.0.0.1:${(stalled.address() as AddressInfo).port}`,
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
      for (const res of hanging) res.destroy()
      for (const socket of stalledSockets) socket.destroy()
      server.closeAllConnections()
      await Promise.all([
        new Promise<void>((resolve) => server.close(() => resolve())),
        new Promise<void>((resolve) => stalled.close(() => resolve())),
      ])
    },
  }
}

export type FakeTwilio = Awaited<ReturnType<typeof startFakeTwilio>>
