import { expect } from 'chai'
import { assertDocumentedAnswer } from './support/api-check.ts'

const json = (body: unknown, extra: Record<string, string> = {}) => ({
  headers: new Headers({ 'content-type': 'application/json; charset=utf-8', ...extra }),
  text: JSON.stringify(body),
})
const problem = (status: number, code: string, extra: Record<string, string> = {}) => ({
  status,
  headers: new Headers({ 'content-type': 'application/problem+json; charset=utf-8', ...extra }),
  text: JSON.stringify({ type: `https://sealpost.dev/problems/${code}`, title: 'x', status, code }),
})
const signUp = { method: 'POST', url: '/sign-ups' }

describe('the response check every HTTP test goes through', () => {
  it('accepts answers the document describes', () => {
    assertDocumentedAnswer(signUp, { status: 202, ...json({ challengeExpiresAt: '2026-12-01T08:00:00.000Z' }) })
    assertDocumentedAnswer(signUp, problem(429, 'resend_too_soon', { 'retry-after': '30' }))
    assertDocumentedAnswer({ method: 'DELETE', url: '/sessions/current' }, { status: 204, headers: new Headers(), text: '' })
    assertDocumentedAnswer({ method: 'GET', url: '/nope' }, problem(404, 'not_found'))
  })

  it('refuses an undocumented status, a problem code the status does not list, and a missing Retry-After', () => {
    expect(() => assertDocumentedAnswer(signUp, problem(500, 'internal_error'))).to.throw('status not documented for startSignUp')
    expect(() => assertDocumentedAnswer(signUp, problem(422, 'invalid_code'))).to.throw('body does not match')
    expect(() => assertDocumentedAnswer(signUp, problem(429, 'rate_limited'))).to.throw('required header Retry-After missing')
  })

  it('refuses a body with a field the schema lacks, a wrong type, or another content type', () => {
    expect(() =>
      assertDocumentedAnswer(signUp, { status: 202, ...json({ challengeExpiresAt: '2026-12-01T08:00:00.000Z', delivered: true }) }),
    ).to.throw('body does not match')
    expect(() => assertDocumentedAnswer(signUp, { status: 202, ...json({ challengeExpiresAt: 'tomorrow' }) })).to.throw(
      'body does not match',
    )
    expect(() =>
      assertDocumentedAnswer(signUp, { status: 202, headers: new Headers({ 'content-type': 'text/html' }), text: '<p>ok</p>' }),
    ).to.throw('content type text/html not documented')
    expect(() => assertDocumentedAnswer({ method: 'DELETE', url: '/sessions/current' }, { status: 204, ...json({}) })).to.throw(
      'documents no body',
    )
  })

  it('refuses an answer from a route the document does not have', () => {
    expect(() => assertDocumentedAnswer({ method: 'GET', url: '/platform-admin/secrets' }, { status: 200, ...json({}) })).to.throw(
      'no operation in the API document',
    )
  })
})
