import { createHmac } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { delay, startFakeHttp, type FakeHttpServer } from '../fake-http.ts'
import type { PhoneInbox } from '../phone-inbox.ts'

/** What the fake answers to one send; `error` is Meta's error object with the given code. */
export type CloudApiBehavior =
  | { kind: 'accept'; delayMs?: number }
  | { kind: 'error'; code: number; status?: number; headers?: Record<string, string> }
  | { kind: 'status'; status: number; body?: unknown }
  /** Counts the message as sent, then never answers: the provider acted, the caller cannot know. */
  | { kind: 'accept-then-hang' }
  | { kind: 'hang' }
  | { kind: 'reset' }
  /** A 200 that is no JSON (a proxy's maintenance page). */
  | { kind: 'garbage' }

export type CloudApiRequest = { to: string; body: unknown; authorization: string | undefined; accepted: boolean; id?: string }

/** A status webhook as Meta posts it for one message (`failed` carries `errors: [{code}]`). */
export type CloudApiStatus = { id: string; status: 'sent' | 'delivered' | 'read' | 'failed'; recipient: string; code?: number; at?: Date }

// The wording Meta fixes for an authentication template (the fake's stand-in for every language).
const PRESET_TEXT = (code: string) => `${code} is your verification code. For your security, do not share this code.`

/** Meta's error body: `{error: {message, type, code, error_subcode, fbtrace_id}}` (the text is the fake's own). */
const metaError = (code: number, subcode = 2494010) => ({
  error: { message: `(#${code}) fake Cloud API error`, type: 'OAuthException', code, error_subcode: subcode, fbtrace_id: 'AFakeTraceId' },
})

/** The Graph API's answer to a POST on an object id it does not know (a wrong phone number id): 400, code 100, subcode 33. */
const UNKNOWN_OBJECT = metaError(100, 33)

/** The code of a documented authentication-template send, or why it is not one (Meta's 132000 / 132001 / 100). */
function templateCode(body: unknown, template: string): { code: string } | { error: number } {
  const b = (body ?? {}) as Record<string, unknown> & { template?: Record<string, unknown> }
  if (b.messaging_product !== 'whatsapp' || b.type !== 'template' || typeof b.to !== 'string') return { error: 100 }
  const t = b.template ?? {}
  if (t.name !== template) return { error: 132001 }
  if (typeof (t.language as { code?: unknown } | undefined)?.code !== 'string') return { error: 100 }
  const components = Array.isArray(t.components) ? (t.components as Record<string, unknown>[]) : []
  const only = (c: Record<string, unknown> | undefined) => {
    const parameters = c?.parameters as { type?: unknown; text?: unknown }[] | undefined
    return Array.isArray(parameters) && parameters.length === 1 && parameters[0]?.type === 'text' ? parameters[0].text : undefined
  }
  const bodyCode = only(components.find((c) => c.type === 'body'))
  const button = components.find((c) => c.type === 'button')
  const buttonCode = button?.sub_type === 'url' && button.index === '0' ? only(button) : undefined
  if (components.length !== 2 || typeof bodyCode !== 'string' || bodyCode !== buttonCode) return { error: 132000 }
  return { code: bodyCode }
}

/** The webhook body Meta posts for these statuses (one entry, one `messages` change). */
const statusesBody = (statuses: CloudApiStatus[], phoneNumberId: string) => ({
  object: 'whatsapp_business_account',
  entry: [
    {
      id: 'FAKE_WABA_ID',
      changes: [
        {
          field: 'messages',
          value: {
            messaging_product: 'whatsapp',
            metadata: { display_phone_number: '15550000000', phone_number_id: phoneNumberId },
            statuses: statuses.map((s) => ({
              id: s.id,
              status: s.status,
              timestamp: String(Math.floor((s.at ?? new Date()).getTime() / 1000)),
              recipient_id: s.recipient.replace(/^\+/, ''),
              ...(s.code === undefined ? {} : { errors: [{ code: s.code, title: 'fake failure' }] }),
            })),
          },
        },
      ],
    },
  ],
})

type FakeCloudOptions = { accessToken: string; phoneNumberId: string; template: string; inbox?: PhoneInbox; port?: number }

const answer = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body))

/** The send a request names, or Meta's error for it: another object id, a body that is no JSON. */
function readSend(req: IncomingMessage, raw: Buffer, phoneNumberId: string): CloudApiRequest | { status: number; error: unknown } {
  if (req.method !== 'POST' || req.url !== `/${phoneNumberId}/messages`) return { status: 400, error: UNKNOWN_OBJECT }
  let body: unknown
  try {
    body = JSON.parse(raw.toString('utf8'))
  } catch {
    return { status: 400, error: metaError(100) }
  }
  const to = (body as { to?: unknown }).to
  return { to: typeof to === 'string' ? to : '', body, authorization: req.headers.authorization, accepted: false }
}

/** One send as the fake answers it: where it came from, and how the message is taken on. */
type SendContext = { req: IncomingMessage; res: ServerResponse; server: FakeHttpServer; take: () => void }

/** Answers a send that passed every check as `behavior` says. */
async function answerSend(behavior: CloudApiBehavior, entry: CloudApiRequest, { req, res, server, take }: SendContext) {
  switch (behavior.kind) {
    case 'accept':
      await delay(behavior.delayMs)
      take()
      return answer(res, 200, {
        messaging_product: 'whatsapp',
        contacts: [{ input: entry.to, wa_id: entry.to.slice(1) }],
        messages: [{ id: entry.id }],
      })
    case 'error':
      return answer(res, behavior.status ?? 400, metaError(behavior.code), behavior.headers)
    case 'status':
      return answer(res, behavior.status, behavior.body ?? {})
    case 'accept-then-hang':
    case 'hang':
    case 'reset':
      return server.fault(behavior.kind, req, res, take)
    case 'garbage':
      return res.writeHead(200, { 'content-type': 'text/html' }).end('<html>maintenance</html>')
  }
}

/**
 * A local WhatsApp Cloud API (`POST /{phone-number-id}/messages`, bearer token, an authentication
 * template → `{messages: [{id: 'wamid…'}]}`) for the tests and `npm start`: it checks the token
 * and the template's shape, records what it accepted into `inbox`, fails on demand (`behave`, a
 * number without WhatsApp, an expired token) and posts Meta-signed status webhooks.
 */
export async function startFakeWhatsAppCloud(options: FakeCloudOptions) {
  const requests: CloudApiRequest[] = []
  let behave: (call: number, request: CloudApiRequest) => CloudApiBehavior = () => ({ kind: 'accept' })
  let tokenExpired = false
  let nextId = 1
  /** Numbers that have no WhatsApp: a send to one is refused with 131026, as Meta does. */
  const withoutWhatsApp = new Set<string>()
  let webhook: { url: string; appSecret: string } | undefined

  const accept = (entry: CloudApiRequest, code: string) => {
    entry.accepted = true
    entry.id = `wamid.FAKE${String(nextId++).padStart(8, '0')}`
    options.inbox?.record({
      provider: 'whatsapp_cloud',
      to: entry.to,
      text: PRESET_TEXT(code),
      providerMessageId: entry.id,
      at: new Date(),
    })
  }

  const server = await startFakeHttp(async (req, res, raw) => {
    const entry = readSend(req, raw, options.phoneNumberId)
    if ('error' in entry) return answer(res, entry.status, entry.error)
    requests.push(entry)
    if (tokenExpired || req.headers.authorization !== `Bearer ${options.accessToken}`) return answer(res, 401, metaError(190))
    const parsed = templateCode(entry.body, options.template)
    if ('error' in parsed) return answer(res, 400, metaError(parsed.error))
    if (withoutWhatsApp.has(entry.to)) return answer(res, 400, metaError(131026))
    await answerSend(behave(requests.length, entry), entry, { req, res, server, take: () => accept(entry, parsed.code) })
  }, options.port)

  /** The raw body and signature header of a status webhook, for tests that tamper with them. */
  const signedStatuses = (statuses: CloudApiStatus[], appSecret = webhook?.appSecret ?? '') => {
    const raw = JSON.stringify(statusesBody(statuses, options.phoneNumberId))
    return { raw, signature: `sha256=${createHmac('sha256', appSecret).update(raw).digest('hex')}` }
  }

  return {
    url: server.url,
    requests,
    /** Messages the provider took on: what a person would receive. */
    accepted: () => requests.filter((request) => request.accepted),
    behave(next: typeof behave) {
      behave = next
    },
    /** Sends to this number are refused with 131026 (it has no WhatsApp). */
    withoutWhatsApp: (number: string) => void withoutWhatsApp.add(number),
    /** Every later send is refused with 190 (the access token expired). */
    expireToken: () => void (tokenExpired = true),
    /** Where status webhooks go and the app secret that signs them. */
    subscribe: (url: string, appSecret: string) => void (webhook = { url, appSecret }),
    signedStatuses,
    /** Posts status webhooks signed as Meta does (`X-Hub-Signature-256`); resolves with the HTTP status. */
    async postStatuses(statuses: CloudApiStatus[]): Promise<number> {
      if (!webhook) throw new Error('no webhook subscribed')
      const { raw, signature } = signedStatuses(statuses)
      const response = await fetch(webhook.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': signature },
        body: raw,
      })
      await response.arrayBuffer()
      return response.status
    },
    stop: server.stop,
  }
}

export type FakeWhatsAppCloud = Awaited<ReturnType<typeof startFakeWhatsAppCloud>>
