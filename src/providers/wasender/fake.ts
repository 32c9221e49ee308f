import type { IncomingMessage, ServerResponse } from 'node:http'
import { delay, startFakeHttp } from '../fake-http.ts'

/** What the fake answers to one request. */
export type WasenderBehavior =
  | { kind: 'accept'; delayMs?: number }
  /** `delayMs`: the failure comes after that long, as a real provider's error answer does. */
  | { kind: 'status'; status: number; headers?: Record<string, string>; body?: unknown; delayMs?: number }
  /** Counts the message as sent, then never answers: the provider acted, the caller cannot know. */
  | { kind: 'accept-then-hang' }
  | { kind: 'hang' }
  | { kind: 'reset' }
  | { kind: 'garbage' }

/** `finishedAt`: when the exchange ended (answered, or the caller gave up on a hang), Date.now() like `at`. */
export type WasenderRequest = {
  to: string
  text: string
  authorization: string | undefined
  at: number
  accepted: boolean
  finishedAt?: number
}

type Answer = { status: number; body: string }
const json = { 'content-type': 'application/json' }

/** The send a request names, or the answer it gets instead: 404 on another path, 400 for a body that is no JSON. */
function readSend(req: IncomingMessage, body: Buffer): WasenderRequest | Answer {
  if (req.method !== 'POST' || req.url !== '/api/send-message') return { status: 404, body: '' }
  let parsed: { to?: string; text?: string }
  try {
    parsed = JSON.parse(body.toString('utf8'))
  } catch {
    return { status: 400, body: '{"success":false}' }
  }
  return { to: parsed.to ?? '', text: parsed.text ?? '', authorization: req.headers.authorization, at: Date.now(), accepted: false }
}

/**
 * A local Wasender that speaks its API (`POST /api/send-message`, bearer key, `{to, text}` →
 * `{success, data: {msgId}}`) and fails on demand through `behave`.
 */
export async function startFakeWasender(apiKey: string) {
  const requests: WasenderRequest[] = []
  let behave: (call: number, request: WasenderRequest) => WasenderBehavior = () => ({ kind: 'accept' })
  let nextId = 1

  /** Answers a send that passed the key check as `behavior` says. */
  const answer = async (behavior: WasenderBehavior, entry: WasenderRequest, req: IncomingMessage, res: ServerResponse) => {
    switch (behavior.kind) {
      case 'accept':
        await delay(behavior.delayMs)
        entry.accepted = true
        return res
          .writeHead(200, json)
          .end(JSON.stringify({ success: true, data: { msgId: nextId++, jid: entry.to, status: 'in_progress' } }))
      case 'status':
        await delay(behavior.delayMs)
        return res
          .writeHead(behavior.status, { ...json, ...behavior.headers })
          .end(JSON.stringify(behavior.body ?? { success: false, message: 'fake failure' }))
      case 'accept-then-hang':
      case 'hang':
      case 'reset':
        return server.fault(behavior.kind, req, res, () => (entry.accepted = true))
      case 'garbage':
        return res.writeHead(200, json).end('<html>maintenance</html>')
    }
  }

  const server = await startFakeHttp(async (req, res, body) => {
    const entry = readSend(req, body)
    if ('status' in entry) return res.writeHead(entry.status, entry.body ? json : {}).end(entry.body)
    requests.push(entry)
    res.once('close', () => (entry.finishedAt = Date.now()))
    if (req.headers.authorization !== `Bearer ${apiKey}`)
      return res.writeHead(401, json).end('{"success":false,"message":"Unauthenticated"}')
    await answer(behave(requests.length, entry), entry, req, res)
  })
  return {
    url: server.url,
    requests,
    /** Messages the provider took on: what a person would receive. */
    accepted: () => requests.filter((request) => request.accepted),
    behave(next: typeof behave) {
      behave = next
    },
    stop: server.stop,
  }
}
