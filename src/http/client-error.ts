import { randomUUID } from 'node:crypto'
import type { Duplex } from 'node:stream'
import type { Logger } from '../logging/logger.ts'

/** Node's parser refusals that are not a malformed request: each its own status (docs/api-errors.md). */
const STATUS_OF: Record<string, [number, string, string]> = {
  // Request line and headers beyond Node's --max-http-header-size (16 KiB by default).
  HPE_HEADER_OVERFLOW: [431, 'headers_too_large', 'The request headers are larger than 16 KiB.'],
  // Headers not complete within server.headersTimeout, or the request not within server.requestTimeout.
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'request_timeout', 'The request did not arrive in time.'],
}
const MALFORMED: [number, string, string] = [400, 'bad_request', 'The request cannot be read.']
const REASON: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' }

/**
 * The server's `clientError` answer: what Node's HTTP parser refuses before any middleware runs (a
 * NUL or a space in a header, a header section over the limit, a raw non-ASCII path) is answered
 * like every other client mistake — an RFC 9457 problem with an X-Request-ID — instead of Node's
 * bare 400. Nothing of the request is echoed or logged but the parser's error code.
 */
export function answerClientError(logger: Logger): (error: Error & { code?: string }, socket: Duplex) => void {
  return (error, socket) => {
    // A reset, or a connection already answering (Node's own check: `_httpMessage` is the answer in progress), takes no other.
    const answering = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true
    if (error.code === 'ECONNRESET' || !socket.writable || answering) {
      socket.destroy()
      return
    }
    const [status, code, title] = STATUS_OF[error.code ?? ''] ?? MALFORMED
    const requestId = randomUUID()
    logger.info('request refused by the HTTP parser', { requestId, status, errorCode: error.code ?? error.name })
    const body = JSON.stringify({ type: `https://sealpost.dev/problems/${code}`, title, status, code })
    socket.end(
      [
        `HTTP/1.1 ${status} ${REASON[status]}`,
        'Content-Type: application/problem+json; charset=utf-8',
        `Content-Length: ${Buffer.byteLength(body)}`,
        `X-Request-ID: ${requestId}`,
        'Cache-Control: no-store',
        'X-Content-Type-Options: nosniff',
        'Connection: close',
        '',
        body,
      ].join('\r\n'),
    )
  }
}
