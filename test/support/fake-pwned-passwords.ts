import { createHash, randomBytes } from 'node:crypto'
import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** What the fake answers to one range request. */
export type RangeBehavior = { kind: 'answer' } | { kind: 'status'; status: number } | { kind: 'hang' }

export type RangeRequest = { url: string; headers: Record<string, string | string[] | undefined> }

const sha1 = (password: string) => createHash('sha1').update(password, 'utf8').digest('hex').toUpperCase()

/**
 * A local Pwned Passwords range API (`GET /range/{5 hex}` → `SUFFIX:COUNT` lines, CRLF): `breached`
 * passwords are listed with a count; `padded` ones appear only as padding (count 0, which
 * `Add-Padding: true` asks for and a client must ignore). Every request is recorded.
 */
export async function startFakePwnedPasswords(lists: { breached: string[]; padded?: string[] }) {
  const counts = new Map<string, number>()
  for (const password of lists.breached) counts.set(sha1(password), 42)
  for (const password of lists.padded ?? []) counts.set(sha1(password), 0)
  const requests: RangeRequest[] = []
  const hanging = new Set<ServerResponse>()
  let behave: (call: number) => RangeBehavior = () => ({ kind: 'answer' })

  const server: Server = createServer((req, res) => {
    requests.push({ url: req.url ?? '', headers: req.headers })
    const behavior = behave(requests.length)
    const prefix = /^\/range\/([0-9A-F]{5})$/i.exec(req.url ?? '')?.[1]?.toUpperCase()
    if (behavior.kind === 'hang') {
      hanging.add(res)
      return
    }
    if (behavior.kind === 'status' || !prefix) {
      res.writeHead(behavior.kind === 'status' ? behavior.status : 400).end()
      return
    }
    const lines = [...counts].filter(([hash]) => hash.startsWith(prefix)).map(([hash, count]) => `${hash.slice(5)}:${count}`)
    // Padding as the real API adds it: random suffixes, count 0, so every answer is about the same size.
    if (req.headers['add-padding'] === 'true') {
      while (lines.length < 800) lines.push(`${randomBytes(18).toString('hex').slice(0, 35).toUpperCase()}:0`)
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(lines.join('\r\n'))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    behave(next: typeof behave) {
      behave = next
    },
    async stop() {
      for (const res of hanging) res.destroy()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
