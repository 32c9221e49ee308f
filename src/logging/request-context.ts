import { AsyncLocalStorage } from 'node:async_hooks'

/** What every log line written while serving one request carries (the logger reads it). */
export type RequestContext = { requestId: string }

/** Set by the web's first middleware for the rest of the request (src/http/request-id.ts). */
export const requestContext = new AsyncLocalStorage<RequestContext>()
