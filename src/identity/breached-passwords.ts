import { createHash } from 'node:crypto'
import { Agent, request } from 'undici'
import { describeError, type Logger } from '../logging/logger.ts'
import type { BreachedPasswordCheck, BreachOutcome } from './password-policy.ts'

/** Have I Been Pwned asks every client to name itself in User-Agent. */
const USER_AGENT = 'Sealpost-breached-password-check'
// A padded range is 800–1 000 lines of 40 bytes; anything far beyond is not the API.
const MAX_RANGE_BYTES = 256 * 1024

/** The k-anonymity split: only `prefix` (5 hex digits of the SHA-1) ever leaves the process. */
export function rangeQuery(password: string): { prefix: string; suffix: string } {
  const sha1 = createHash('sha1').update(password, 'utf8').digest('hex').toUpperCase()
  return { prefix: sha1.slice(0, 5), suffix: sha1.slice(5) }
}

/**
 * Whether a range answer (`SUFFIX:COUNT` lines) lists `suffix` as seen: padding entries
 * (`Add-Padding: true`) carry the count 0 and are no breach. Pure, for table tests.
 */
export function rangeLists(body: string, suffix: string): boolean {
  for (const line of body.split(/\r?\n/)) {
    const [candidate, count] = line.trim().split(':')
    if (candidate?.toUpperCase() === suffix && Number(count) > 0) return true
  }
  return false
}

export type BreachedPasswordSettings = {
  /** BREACHED_PASSWORD_API_URL: the range API's base (`{apiUrl}/range/{prefix}`). */
  apiUrl: string
  /** BREACHED_PASSWORD_TIMEOUT_MS: the whole exchange, answer included. */
  timeoutMs: number
  logger: Logger
}

/**
 * Have I Been Pwned's Pwned Passwords range API, padded (docs/security.md "Security properties"). Any
 * failure (refused, slow, not 200, too large) is `unavailable`, logged by error name and status
 * only: never the password, its hash or its prefix.
 */
export function createBreachedPasswordCheck(settings: BreachedPasswordSettings): { check: BreachedPasswordCheck; close(): Promise<void> } {
  const agent = new Agent({ keepAliveTimeout: 10_000, connections: 16 })
  const base = settings.apiUrl.endsWith('/') ? settings.apiUrl : `${settings.apiUrl}/`
  const unavailable = (details: Record<string, unknown>): BreachOutcome => {
    settings.logger.warn('breached-password check unavailable; the password is accepted unchecked', details)
    return 'unavailable'
  }
  async function check(password: string): Promise<BreachOutcome> {
    const { prefix, suffix } = rangeQuery(password)
    const signal = AbortSignal.timeout(settings.timeoutMs)
    try {
      const response = await request(new URL(`range/${prefix}`, base), {
        method: 'GET',
        dispatcher: agent,
        signal,
        headers: { 'add-padding': 'true', 'user-agent': USER_AGENT, accept: 'text/plain' },
      })
      if (response.statusCode !== 200) {
        await response.body.dump()
        return unavailable({ status: response.statusCode })
      }
      let body = ''
      for await (const chunk of response.body) {
        body += (chunk as Buffer).toString('latin1')
        if (body.length > MAX_RANGE_BYTES) {
          response.body.destroy()
          return unavailable({ errorName: 'RangeTooLarge' })
        }
      }
      return rangeLists(body, suffix) ? 'breached' : 'clean'
    } catch (error) {
      return unavailable(signal.aborted ? { errorName: 'Timeout' } : describeError(error))
    }
  }
  return { check, close: async () => await agent.close() }
}
