import { request } from 'node:http'
import { connect } from 'node:net'

/** An answer as the wire carried it: the status, the headers (lower-case names) and the body text. */
export type RawAnswer = { status: number; headers: Headers; text: string }

/**
 * Sends exactly the method, path, headers and body given, whatever they are: `fetch` refuses a body
 * on GET, normalizes paths and percent-encodes what it sends, and an attacker does none of that.
 */
export async function sendRaw(
  baseUrl: string,
  input: { method: string; path: string; headers?: Record<string, string>; body?: string | Buffer },
): Promise<RawAnswer> {
  const { hostname, port } = new URL(baseUrl)
  // Node frames a body on GET or DELETE only when told its length; unframed, it would reach the server as a second request.
  const framing = input.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(input.body)) }
  const headers = { ...framing, ...input.headers }
  return await new Promise((resolve, reject) => {
    const outgoing = request({ host: hostname, port, method: input.method, path: input.path, headers, agent: false }, (incoming) => {
      const chunks: Buffer[] = []
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk))
      incoming.on('error', reject)
      incoming.on('end', () => {
        const headers = new Headers()
        for (const [name, value] of Object.entries(incoming.headers))
          for (const one of Array.isArray(value) ? value : [value]) if (one !== undefined) headers.append(name, one)
        resolve({ status: incoming.statusCode ?? 0, headers, text: Buffer.concat(chunks).toString('utf8') })
      })
    })
    outgoing.on('error', reject)
    outgoing.end(input.body)
  })
}

/** Writes raw bytes on a new connection and reads the answer: for header bytes Node's own client refuses to send. */
export async function sendBytes(baseUrl: string, bytes: Buffer | string): Promise<RawAnswer> {
  const { hostname, port } = new URL(baseUrl)
  const received = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = []
    // Written without a FIN: Node's server drops a request whose client half-closed before the answer.
    // The request says `Connection: close` (or is refused), so the server closes once it has answered.
    const socket = connect(Number(port), hostname, () => socket.write(bytes))
    socket.setTimeout(20_000, () => socket.destroy(new Error('no answer within 20 s')))
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('close', () => resolve(Buffer.concat(chunks)))
  })
  const text = received.toString('utf8')
  const split = text.indexOf('\r\n\r\n')
  const [statusLine = '', ...lines] = text.slice(0, split < 0 ? text.length : split).split('\r\n')
  const headers = new Headers()
  for (const line of lines) {
    const colon = line.indexOf(':')
    if (colon > 0) headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim())
  }
  return { status: Number(statusLine.split(' ')[1] ?? 0), headers, text: split < 0 ? '' : text.slice(split + 4) }
}
