import { SealpostError } from '../errors/sealpost-error.ts'

/** Domain refusals; src/http/problem.ts maps each to a status and a stable problem `code`. */
export class DomainError extends SealpostError {
  override name = 'DomainError'
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

/** Wrong, expired or consumed code: one answer for all three, so it is no oracle. */
export class InvalidCodeError extends DomainError {
  constructor() {
    super('invalid_code', 'The code is wrong or no longer valid.')
  }
}

export class InvalidCredentialsError extends DomainError {
  constructor() {
    super('invalid_credentials', 'The identifier or the password is wrong.')
  }
}

export class UnauthenticatedError extends DomainError {
  constructor() {
    super('unauthenticated', 'A valid session token is required.')
  }
}

export class RateLimitedError extends DomainError {
  readonly retryAfterSeconds: number
  constructor(retryAfterSeconds: number, code = 'rate_limited') {
    super(code, 'Too many requests; try again later.')
    this.retryAfterSeconds = Math.max(1, Math.ceil(retryAfterSeconds))
  }
}

export class ChannelUnavailableError extends DomainError {
  constructor() {
    super('channel_unavailable', 'Codes cannot be sent to this kind of identifier here.')
  }
}

/**
 * Retryable: a live worker of an older release cannot render this purpose yet (a rolling upgrade,
 * docs/upgrading.md "Format negotiation"); 503 with Retry-After, nothing written.
 */
export class UpgradeInProgressError extends DomainError {
  readonly retryAfterSeconds: number
  constructor(retryAfterSeconds: number) {
    super('upgrade_in_progress', 'A worker of an older release cannot send this kind of message yet; try again shortly.')
    this.retryAfterSeconds = retryAfterSeconds
  }
}

export class ConflictError extends DomainError {}

/** Signed in, but not allowed to do this (e.g. not an admin of the organization). */
export class ForbiddenError extends DomainError {}

export class NotFoundError extends DomainError {}

/** Used, revoked, expired or unknown invitation token: one answer for all, so it is no oracle. */
export class InvalidInvitationError extends DomainError {
  constructor() {
    super('invalid_invitation', 'The invitation is not valid any more.')
  }
}

/** A new password shorter than the policy's minimum (src/identity/password-policy.ts). */
export class WeakPasswordError extends DomainError {
  constructor(minCharacters: number) {
    super('weak_password', `The password must be at least ${minCharacters} characters long.`)
  }
}

/** A new password found in a known breach (Have I Been Pwned's Pwned Passwords). */
export class BreachedPasswordError extends DomainError {
  constructor() {
    super('breached_password', 'This password appears in a known data breach; choose another one.')
  }
}

/** Well-formed input a rule refuses (an expiry out of bounds, a link that is not https): 422 with its own code. */
export class UnprocessableError extends DomainError {}
