import { WebhookUrlRefusedError } from '../platform/webhook-address-guard.ts'
import type { ErrorRequestHandler, Response } from 'express'
import { z } from 'zod'
import {
  BreachedPasswordError,
  ChannelUnavailableError,
  UpgradeInProgressError,
  ConflictError,
  DomainError,
  ForbiddenError,
  InvalidInvitationError,
  NotFoundError,
  InvalidCodeError,
  InvalidCredentialsError,
  RateLimitedError,
  UnauthenticatedError,
  UnprocessableError,
  WeakPasswordError,
} from '../identity/errors.ts'
import { isTransientDatabaseError } from '../db/transient.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import { InvalidOrganizationNameError } from '../organization/organization-name.ts'
import { SealpostError } from '../errors/sealpost-error.ts'

/** A refusal with an HTTP status and a stable `code` (RFC 9457 problem details). */
export class HttpProblemError extends SealpostError {
  override name = 'HttpProblemError'
  readonly status: number
  readonly code: string
  readonly headers: Record<string, string>
  readonly extra: Record<string, unknown>
  constructor(
    status: number,
    code: string,
    title: string,
    options: { headers?: Record<string, string>; extra?: Record<string, unknown> } = {},
  ) {
    super(title)
    this.status = status
    this.code = code
    this.headers = options.headers ?? {}
    this.extra = options.extra ?? {}
  }
}

export function sendProblem(res: Response, problem: HttpProblemError): void {
  res.set(problem.headers)
  res
    .status(problem.status)
    .type('application/problem+json')
    .json({
      type: `https://sealpost.dev/problems/${problem.code}`,
      title: problem.message,
      status: problem.status,
      code: problem.code,
      ...problem.extra,
    })
}

const DOMAIN_STATUS: [new (...args: never[]) => DomainError, number][] = [
  [InvalidCodeError, 422],
  [InvalidCredentialsError, 401],
  [UnauthenticatedError, 401],
  [RateLimitedError, 429],
  [ChannelUnavailableError, 422],
  [UpgradeInProgressError, 503],
  [ConflictError, 409],
  [ForbiddenError, 403],
  [NotFoundError, 404],
  [InvalidInvitationError, 422],
  [InvalidOrganizationNameError, 422],
  [WeakPasswordError, 422],
  [BreachedPasswordError, 422],
  [UnprocessableError, 422],
  [WebhookUrlRefusedError, 422],
]

/** The problem a domain refusal is answered with (its status, code and headers). */
export function problemOfDomain(error: DomainError): HttpProblemError {
  const status = DOMAIN_STATUS.find(([type]) => error instanceof type)?.[1] ?? 400
  const retryable = error instanceof RateLimitedError || error instanceof UpgradeInProgressError
  const headers: Record<string, string> = retryable ? { 'Retry-After': String(error.retryAfterSeconds) } : {}
  if (error instanceof UnauthenticatedError) headers['WWW-Authenticate'] = 'Bearer'
  return new HttpProblemError(status, error.code, error.message, { headers })
}

function hasContentEncoding(value: string | undefined): boolean {
  return value !== undefined && value.trim().toLowerCase() !== 'identity' && value.trim() !== ''
}

/** Maps every error to a problem response in one place; nothing but HttpProblemError text leaves. */
export function problemHandler(logger: Logger): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    const typed = error as { type?: string; status?: number }
    let problem: HttpProblemError
    if (error instanceof HttpProblemError) problem = error
    else if (error instanceof DomainError) problem = problemOfDomain(error)
    else if (error instanceof z.ZodError) {
      problem = new HttpProblemError(422, 'invalid_request', 'The request body is not valid.', {
        extra: { errors: error.issues.map((issue) => ({ pointer: '/' + issue.path.join('/'), detail: issue.message })) },
      })
    } else if (typed.type === 'entity.too.large')
      problem = new HttpProblemError(413, 'payload_too_large', 'The request body is larger than this route accepts (16 KiB for the API).')
    else if (typed.type === 'entity.parse.failed')
      problem = new HttpProblemError(400, 'malformed_json', 'The request body is not valid JSON.')
    else if (error instanceof URIError)
      // The router decodes path parameters with decodeURIComponent: `%`, `%ZZ`, overlong or surrogate UTF-8.
      problem = new HttpProblemError(400, 'malformed_path', 'The request path is not valid percent-encoded UTF-8.')
    else if (typed.status === 400 && !typed.type && hasContentEncoding(req.get('content-encoding')))
      // body-parser could not inflate the body (zlib or brotli refused it): the client's mistake, not ours.
      problem = new HttpProblemError(400, 'malformed_encoding', 'The request body is not encoded as its Content-Encoding says.')
    else if (typed.type && typed.status && typed.status >= 400 && typed.status < 500)
      problem = new HttpProblemError(typed.status, 'bad_request', 'The request cannot be read.')
    // No database right now, or a conflict or timeout a later try resolves (src/db/transient.ts),
    // left after the use case's own retries: 503 + Retry-After, never 500.
    else if (isTransientDatabaseError(error)) {
      logger.warn('database unavailable', { route: req.route?.path, ...describeError(error) })
      problem = new HttpProblemError(503, 'service_unavailable', 'Try again shortly.', { headers: { 'Retry-After': '5' } })
    } else {
      logger.error('unhandled request error', { route: req.route?.path, ...describeError(error) })
      problem = new HttpProblemError(500, 'internal_error', 'Something went wrong on our side.')
    }
    sendProblem(res, problem)
  }
}
