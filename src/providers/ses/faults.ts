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
  recipient_refused:
    '400 `MessageRejected` naming the recipient (the sandbox); one naming our own `SES_FROM_ADDRESS` as unverified refuses us: `provider_misconfigured`',
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

/** What precedes the identities SES lists in a `MessageRejected` for unverified identities ("…: a@x, B <b@y>"). */
const FAILED_IDENTITIES = /failed the check in region [^:]*:(.*)$/s

/**
 * Whether a `MessageRejected` names `fromAddress` among the identities SES could not verify: our
 * own From address is not verified (never, or its DNS records are gone), which refuses *us*. Each
 * listed identity is compared whole (its `<…>` part when it has one), never as a substring, so no
 * recipient's address can pass for ours. The text is only read here, never copied.
 */
function namesOurSender(message: unknown, fromAddress: string | undefined): boolean {
  if (!fromAddress || typeof message !== 'string') return false
  const listed = FAILED_IDENTITIES.exec(message)?.[1]
  if (!listed) return false
  const ours = fromAddress.trim().toLowerCase()
  return listed.split(',').some((identity) => {
    const address = /<([^>]*)>/.exec(identity)?.[1] ?? identity
    return address.trim().toLowerCase() === ours
  })
}

/**
 * Maps an SES SDK error (an answer SES gave) to its row of the fault table; `fromAddress` is
 * SES_FROM_ADDRESS, which tells our unverified sender from a recipient SES will not send to. Pure,
 * table-tested.
 */
export function classifySesError(error: unknown, fromAddress?: string): { fault: Fault; providerCode: string } {
  const { name, message, $metadata } = (error ?? {}) as { name?: string; message?: unknown; $metadata?: { httpStatusCode?: number } }
  const status = $metadata?.httpStatusCode
  const providerCode = name ?? 'unknown'
  if (name && THROTTLED_NAMES.has(name)) return { fault: 'throttled', providerCode }
  if (name && MISCONFIGURED_NAMES.has(name)) return { fault: 'provider_misconfigured', providerCode }
  // Our From identity is not verified: every email would be refused alike, so it is ours, never the person's.
  if (name === 'MessageRejected' && namesOurSender(message, fromAddress)) return { fault: 'provider_misconfigured', providerCode }
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
