import { expect } from 'chai'
import { createVerifiedIdentity } from './support/helpers.ts'
import { useIdentityKit } from './support/identity-kit.ts'

/**
 * SMS pumping starts at the web: a stranger asks for codes to numbers that earn whoever rents
 * them (premium-rate) or that cannot read a text (a landline we would pay to call). Performed
 * through the real routes; each test fails if a code can be asked for such a number, or if the
 * refusal tells a number with an account from one without.
 */
describe('attacks on the phone numbers codes go to', () => {
  const { f, call, code, signedIn, elevate } = useIdentityKit()
  // A London landline and a UK premium-rate number (Ofcom's ranges), with and without an account.
  const LANDLINE = { known: '+442079460018', unknown: '+442079460019' }
  const PREMIUM = { known: '+449098790000', unknown: '+449098790001' }

  /** What a caller can compare between two answers: status, body, and headers (minus those that differ per request). */
  const observable = (answer: Awaited<ReturnType<typeof call>>) => {
    const headers = [...answer.headers.entries()].filter(([name]) => !['date', 'x-request-id', 'traceparent'].includes(name))
    return JSON.stringify([answer.status, answer.body, headers])
  }
  const written = async () => {
    const [challenges, messages, claims] = await Promise.all([
      f.db.owner('identity.challenges').count<{ count: string }[]>('* as count'),
      f.db.owner('outbox.security_outbox_messages').count<{ count: string }[]>('* as count'),
      f.db.owner('identity.login_identifiers').count<{ count: string }[]>('* as count'),
    ])
    return [challenges[0]!.count, messages[0]!.count, claims[0]!.count]
  }

  it('a premium-rate number and a landline are refused alike for known and unknown identifiers: 422 unsupported_phone_number, nothing written', async () => {
    // The known ones have accounts from before this check (the old shape check let them in).
    await createVerifiedIdentity(f.db.owner, LANDLINE.known)
    await createVerifiedIdentity(f.db.owner, PREMIUM.known)
    const before = await written()
    const numbers = [LANDLINE.known, LANDLINE.unknown, PREMIUM.known, PREMIUM.unknown]
    const routes: [string, (identifier: string) => Record<string, unknown>][] = [
      ['/sign-ups', (identifier) => ({ identifier, password: 'a pumped number asks for a code' })],
      ['/password-recoveries', (identifier) => ({ identifier })],
      ['/sign-ups/confirmation', (identifier) => ({ identifier, code: '123456', password: 'a pumped number asks for a code' })],
      ['/password-recoveries/completion', (identifier) => ({ identifier, code: '123456', newPassword: 'a pumped number asks for a code' })],
    ]
    for (const [path, body] of routes) {
      const answers = []
      for (const identifier of numbers) answers.push(await call('POST', path, body(identifier)))
      expect(answers[0]!.status, `${path}: a landline with an account`).to.equal(422)
      expect(answers[0]!.body, path).to.include({ code: 'unsupported_phone_number' })
      expect(answers[0]!.headers.get('content-type'), path).to.match(/^application\/problem\+json/)
      expect(new Set(answers.map(observable)).size, `${path}: the four answers are one`).to.equal(1)
    }
    expect(await written(), 'no challenge, message or claim').to.deep.equal(before)
  })

  it('a premium-rate number cannot be added as a sign-in method either: 422 before the claim', async () => {
    const member = await signedIn()
    const headers = await elevate(member)
    const before = await written()
    const refused = await call('POST', '/sign-in-methods', { identifier: PREMIUM.unknown }, headers)
    expect(refused.status).to.equal(422)
    expect(refused.body).to.include({ code: 'unsupported_phone_number' })
    expect(await written()).to.deep.equal(before)
  })

  it('two spellings of one mobile are one identifier: one account, and the other spelling signs in', async () => {
    const password = 'one number however it is written'
    expect((await call('POST', '/sign-ups', { identifier: '+54 9 11 4888-5050', password })).status).to.equal(202)
    const confirmed = await call('POST', '/sign-ups/confirmation', {
      identifier: '+54 (9) 11 4888 5050',
      code: await code('+5491148885050'),
      password,
    })
    expect(confirmed.status).to.equal(201)
    // The second spelling asks for a sign-up again: the owner's recovery path, not a second account.
    expect((await call('POST', '/sign-ups', { identifier: '+5491148885050', password: 'a second account for it?' })).status).to.equal(202)
    const rows = await f.db.owner('identity.login_identifiers').where({ kind: 'phone' }).whereLike('value', '%48885050')
    expect(rows.map((row: { value: string }) => row.value)).to.deep.equal(['+5491148885050'])
    expect((await call('POST', '/sessions', { identifier: '+54.9.11.4888.5050', password })).status).to.equal(201)
  })
})
