import { isIP } from 'node:net'
import { Router, type Request, type RequestHandler } from 'express'
import { HttpProblemError, sendProblem } from './problem.ts'

/** What the page shows of one message a local phone fake accepted (src/runtime/phone-inbox.ts). */
export type PhoneInboxMessage = { provider: string; to: string; text: string; at: Date }
export type PhoneInboxSource = { list(): readonly PhoneInboxMessage[] }

export const PHONE_INBOX_PATH = '/dev/phone-inbox'

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char]!)

// The inbox shows codes in the clear, and `npm start` may listen on every interface (HOST=0.0.0.0
// for a phone on the LAN): like the SES emulator's inbox, it answers this machine only. The
// socket's own address decides, never a forwarded header a LAN client could write.
export function fromThisMachine(req: Pick<Request, 'socket'>): boolean {
  const address = req.socket.remoteAddress ?? ''
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address
  return address === '::1' || (isIP(v4) === 4 && v4.startsWith('127.'))
}

function page(messages: readonly PhoneInboxMessage[]): string {
  const rows = messages
    .map(
      (message) => `<tr>
        <td><time datetime="${message.at.toISOString()}">${message.at.toISOString().replace('T', ' ').slice(0, 19)}</time></td>
        <td>${escapeHtml(message.provider)}</td>
        <td>${escapeHtml(message.to)}</td>
        <td><pre>${escapeHtml(message.text)}</pre></td>
      </tr>`,
    )
    .join('\n      ')
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Sealpost (development): phone inbox</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
</head>
<body>
  <main>
    <h1>Phone inbox</h1>
    <p>What the local fakes of the phone providers accepted in this run, newest first (in memory; reload to see new ones). JSON: <a href="${PHONE_INBOX_PATH}.json">${PHONE_INBOX_PATH}.json</a>.</p>
    ${
      messages.length === 0
        ? '<p>No phone message yet: ask for a code for a phone number while a local phone fake is configured.</p>'
        : `<table>
      <thead><tr><th>Time (UTC)</th><th>Provider</th><th>Number</th><th>Text</th></tr></thead>
      <tbody>
      ${rows}
      </tbody>
    </table>`
    }
  </main>
</body>
</html>
`
}

/**
 * `npm start` only (the dev stack passes its inbox; nothing else does, and `npm start` is refused in
 * staging and production): the phone messages of this run, newest first, as HTML and as JSON for
 * scripts, under the development pages' headers and CSP (`headers`).
 */
export function phoneInboxPage(inbox: PhoneInboxSource, headers: RequestHandler): Router {
  const router = Router()
  const thisMachineOnly: RequestHandler = (req, res, next) => {
    if (fromThisMachine(req)) return next()
    sendProblem(res, new HttpProblemError(404, 'not_found', 'No such route.'))
  }
  const newestFirst = () => [...inbox.list()].reverse()
  router.get(PHONE_INBOX_PATH, thisMachineOnly, headers, (_req, res) => {
    res.type('html').send(page(newestFirst()))
  })
  router.get(`${PHONE_INBOX_PATH}.json`, thisMachineOnly, headers, (_req, res) => {
    res.json({ messages: newestFirst().map(({ provider, to, text, at }) => ({ provider, to, text, at: at.toISOString() })) })
  })
  return router
}
