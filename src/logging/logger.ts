import type { Writable } from 'node:stream'
import winston from 'winston'
import { requestContext } from './request-context.ts'

/** The logger every module receives; a winston logger, narrowed to what we use. */
export type Logger = Pick<winston.Logger, 'error' | 'warn' | 'info' | 'debug' | 'child'>

// Keys whose values are secrets or personal data. `errorCode` is how we log an error's code, so a
// bare `code` (an OTP as often as not) is always redacted.
const SECRET_KEYS = new Set([
  'code',
  'otp',
  'token',
  'password',
  'newpassword',
  'secret',
  'envelope',
  'ciphertext',
  'plaintext',
  'authorization',
  'cookie',
  'destination',
  'identifier',
  'email',
  'phone',
  'to',
  'key',
  'apikey',
  'body',
  'text',
  'message_body',
  'connectionstring',
  'databaseurl',
])
const EMAIL = /[^\s@"'<>]+@[^\s@"'<>]+\.[^\s@"'<>]+/g
const PHONE = /\+\d{8,15}/g
const REDACTED = '[redacted]'

/** Masks secrets in any value before it is serialized; pure, so it has a table test. */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 6) return REDACTED
  // Every address holds an @, every number a +: most strings need no pattern run.
  if (typeof value === 'string')
    return value.includes('@') || value.includes('+') ? value.replace(EMAIL, REDACTED).replace(PHONE, REDACTED) : value
  if (typeof value === 'bigint') return value.toString()
  // A function writes nothing: JSON would write whatever its own toJSON returned.
  if (typeof value === 'function') return undefined
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString()
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return REDACTED
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1))
  if (value instanceof Error) return { errorName: value.name }
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const [key, inner] of Object.entries(value)) {
      out[key] = SECRET_KEYS.has(key.toLowerCase()) ? REDACTED : redact(inner, depth + 1)
    }
    return out
  }
  return value
}

// winston's own "message" symbol (triple-beam): the serialized line a transport writes.
const MESSAGE = Symbol.for('message')

/**
 * One pass per line: the time, the level and message first, then every other field through
 * `redact` (secret-bearing keys masked, addresses and numbers in text masked), inside a web request
 * its id (X-Request-ID) whoever wrote the line; then JSON. (It was four winston formats, the last a
 * serializer configured anew for every line: a share of the worker's CPU per message.)
 */
const lineFormat = winston.format((info) => {
  const line: Record<string, unknown> = { timestamp: new Date().toISOString(), level: info.level }
  // Only a message the line was given as a field: an Error logged on its own is its name, never
  // its text (which may quote a connection string or a code).
  if (Object.prototype.propertyIsEnumerable.call(info, 'message')) line.message = redact(info.message, 1)
  if (info instanceof Error) Object.assign(line, describeError(info))
  for (const key of Object.keys(info)) {
    if (key === 'level' || key === 'message' || key === 'timestamp') continue
    line[key] = SECRET_KEYS.has(key.toLowerCase()) ? REDACTED : redact(info[key], 1)
  }
  const store = requestContext.getStore()
  if (store && line.requestId === undefined) line.requestId = store.requestId
  ;(info as Record<symbol, unknown>)[MESSAGE] = JSON.stringify(line)
  return info
})

/** JSON lines to stdout (or a given stream, for tests), every line through the redaction step. */
export function createLogger(options: { level: string; stream?: Writable; base?: Record<string, unknown> }): Logger {
  return winston.createLogger({
    level: options.level,
    defaultMeta: options.base,
    format: lineFormat(),
    transports: [options.stream ? new winston.transports.Stream({ stream: options.stream }) : new winston.transports.Console()],
  })
}

/** The fields a failure is logged with: its name and code, never its message. */
export function describeError(error: unknown): { errorName: string; errorCode?: string } {
  if (error && typeof error === 'object') {
    const { name, code } = error as { name?: unknown; code?: unknown }
    return {
      errorName: typeof name === 'string' ? name : 'Error',
      ...(typeof code === 'string' || typeof code === 'number' ? { errorCode: String(code) } : {}),
    }
  }
  return { errorName: typeof error }
}
