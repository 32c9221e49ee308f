import type { Fault, FaultAnswers } from '../faults.ts'

/** What SES answers in each case of the fault table (docs/delivery.md "Fault table"). */
export const FAULT_ANSWERS: FaultAnswers = {
  malformed: '400 `BadRequestException`',
  unauthorized: '403 `UnrecognizedClientException` (an unknown access key: AWS never answers 401)',
  forbidden: '403 `AccessDeniedException`',
  not_found: '404 `NotFoundException` (a mistyped `SES_CONFIGURATION_SET`)',
  too_large: '413 from AWS’s front door, no error type',
  throttled: '429 `TooManyRequestsException`',
  throttled_seconds: '429 `TooManyRequestsException`, `Retry-After: 30`',
  throttled_date: '429 `TooManyRequestsException`, `Retry-After: <HTTP date>`',
  server_error: '500 `InternalFailure`',
  bad_gateway: '502, no error type',
  unavailable: '503 `ServiceUnavailable`',
  gateway_timeout: '504, no error type',
  refused: 'nothing listens at the endpoint',
  timeout_before: 'a TLS handshake that never completes',
  timeout_after: 'SES took the message, the answer never comes',
  reset: 'the socket closes once the request is read',
  recipient_refused: '400 `MessageRejected`',
  not_on_channel: undefined,
  unreadable_success: '200 with an HTML page',
}

/**
 * SES and AWS error names (the `x-amzn-ErrorType` the SDK reads) that say SES refused *us*: the
 * credentials or their signature, our permissions, a configuration set or MAIL FROM domain of ours
 * that does not exist or is not verified, a suspended or paused account.
 */
const MISCONFIGURED_NAMES = new Set([
  'AccessDeniedException',
  'UnrecognizedClientException',
  'InvalidClientTokenId',
  'InvalidSignatureException',
  'SignatureDoesNotMatch',
  'IncompleteSignature',
  'MissingAuthenticationToken',
  'ExpiredTokenException',
  'NotFoundException',
  'MailFromDomainNotVerifiedException',
  'AccountSuspendedException',
  'SendingPausedException',
])
const THROTTLED_NAMES = new Set(['TooManyRequestsException', 'LimitExceededException', 'ThrottlingException'])

/** Maps an SES SDK error (an answer SES gave) to its row of the fault table; pure, table-tested. */
export function classifySesError(error: unknown): { fault: Fault; providerCode: string } {
  const { name, $metadata } = (error ?? {}) as { name?: string; $metadata?: { httpStatusCode?: number } }
  const status = $metadata?.httpStatusCode
  const providerCode = name ?? 'unknown'
  if (name && THROTTLED_NAMES.has(name)) return { fault: 'throttled', providerCode }
  if (name && MISCONFIGURED_NAMES.has(name)) return { fault: 'provider_misconfigured', providerCode }
  // MessageRejected: SES will not send to this recipient (a sandbox's unverified address, a suppressed one).
  if (name === 'MessageRejected') return { fault: 'recipient_refused', providerCode }
  if (name === 'BadRequestException') return { fault: 'request_refused', providerCode }
  if (status === 429) return { fault: 'throttled', providerCode }
  if (status === 401 || status === 403 || status === 404) return { fault: 'provider_misconfigured', providerCode }
  if (status === 408 || status === 504) return { fault: 'indeterminate', providerCode }
  if (status !== undefined && status >= 500) return { fault: 'unavailable', providerCode }
  if (status !== undefined && status >= 400) return { fault: 'request_refused', providerCode }
  // A 2xx the SDK could not read, or an answer without a status: it may have been sent.
  return { fault: 'indeterminate', providerCode }
}
