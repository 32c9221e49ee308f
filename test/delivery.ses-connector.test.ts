import { expect } from 'chai'
import { classifySesError } from '../src/delivery/ses-connector.ts'

describe('SES failure classification', () => {
  const cases: [string, unknown, string][] = [
    ['MessageRejected', { name: 'MessageRejected', $metadata: { httpStatusCode: 400 } }, 'REJECTED'],
    ['BadRequestException', { name: 'BadRequestException' }, 'REJECTED'],
    ['NotFoundException', { name: 'NotFoundException' }, 'REJECTED'],
    ['TooManyRequestsException', { name: 'TooManyRequestsException' }, 'THROTTLED'],
    ['LimitExceededException', { name: 'LimitExceededException' }, 'THROTTLED'],
    ['a bare 429', { name: 'Unknown', $metadata: { httpStatusCode: 429 } }, 'THROTTLED'],
    ['403 on our credentials', { name: 'AccessDeniedException', $metadata: { httpStatusCode: 403 } }, 'UNAVAILABLE'],
    ['a suspended account', { name: 'AccountSuspendedException' }, 'UNAVAILABLE'],
    ['a 503', { name: 'ServiceUnavailable', $metadata: { httpStatusCode: 503 } }, 'UNAVAILABLE'],
    ['connection refused', { name: 'Error', code: 'ECONNREFUSED' }, 'UNAVAILABLE'],
    ['a 504', { name: 'GatewayTimeout', $metadata: { httpStatusCode: 504 } }, 'INDETERMINATE'],
    ['an abort', { name: 'AbortError' }, 'INDETERMINATE'],
    ['a reset', { name: 'Error', code: 'ECONNRESET' }, 'INDETERMINATE'],
    ['something unknown', {}, 'INDETERMINATE'],
  ]
  for (const [what, error, expected] of cases) {
    it(`classifies ${what} as ${expected}`, () => {
      expect(classifySesError(error).failureClass).to.equal(expected)
    })
  }
})
