import type { FaultAnswers } from '../faults.ts'

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
