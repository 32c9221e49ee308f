import createClient, { type Client, type ClientOptions } from 'openapi-fetch'
import type { components, paths } from './schema.ts'

export type { components, operations, paths } from './schema.ts'
/** A problem answer (RFC 9457); each operation's errors narrow `code` to the values that status can carry. */
export type Problem = components['schemas']['Problem']
export type SealpostClient = Client<paths>

/**
 * A typed client for the Sealpost API: paths, parameters, bodies and answers (problems included)
 * are checked by TypeScript against the API document (`client/schema.ts`).
 */
export function createSealpostClient(baseUrl: string, options: Omit<ClientOptions, 'baseUrl'> = {}): SealpostClient {
  return createClient<paths>({ ...options, baseUrl })
}

/** Headers for a signed-in call: `{ headers: bearer(token) }`. */
export function bearer(token: string): { Authorization: string } {
  return { Authorization: `Bearer ${token}` }
}
