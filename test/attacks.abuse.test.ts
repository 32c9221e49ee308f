import { expect } from 'chai'
import { createSessionTx } from '../src/identity/sessions.ts'
import { createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { newestCode } from './support/sealed-codes.ts'
import { useWebStack } from './support/web-stack.ts'

/** Pumping, mail bombing and guessing from one account, performed through the real routes. */
describe('abuse of the code-sending routes', () => {
  let now = new Date()
  const clock = () => now
  const later = (seconds: number) => {
    now = new Date(now.getTime() + seconds * 1000)
  }
  const f = useWebStack({ worker: false, clock })
  const call = (...args: Parameters<typeof f.stack.call>) => f.stack.call(...args)
  const code = (destination: string) => newestCode(f.db, f.keys, destination)
  const wrongFor = (right: string) => (right === '000000' ? '111111' : '000000')
  const sentTo = async (destination: string) => (await f.db.owner('outbox.security_outbox_messages').where({ destination })).length

  async function signedIn(email = uniqueEmail('member')) {
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    const { token } = await f.db.owner.transaction((trx) => createSessionTx(trx, identityId, now))
    return { email, auth: f.stack.bearer(token) }
  }
  async function elevate(who: { email: string; auth: Record<string, string> }) {
    expect((await call('POST', '/step-ups', {}, who.auth)).status).to.equal(202)
    const confirmed = await call('POST', '/step-ups/confirmation', { code: await code(who.email) }, who.auth)
    expect(confirmed.status).to.equal(201)
    return { ...who.auth, 'x-elevation-token': String(confirmed.body!.elevationToken) }
  }

  beforeEach(() => {
    now = new Date()
  })

  it('pumping from one session: the 11th sign-in method an identity adds within the hour is refused with 429 and nothing is sent', async () => {
    const pumper = await signedIn()
    const elevated = await elevate(pumper)
    const targets = Array.from({ length: 11 }, () => uniqueEmail('target'))
    for (const target of targets.slice(0, 10)) expect((await call('POST', '/sign-in-methods', { identifier: target }, elevated)).status).to.equal(202)
    const refused = await call('POST', '/sign-in-methods', { identifier: targets[10] }, elevated)
    expect(refused.status).to.equal(429)
    expect(refused.body).to.include({ code: 'identity_rate_limited' })
    expect(Number(refused.headers.get('retry-after'))).to.be.within(3_500, 3_600)
    expect(await sentTo(targets[10]!)).to.equal(0)
  })

  it('pumping step-up codes: the sixth to one identity within the hour is refused with 429', async () => {
    const pumper = await signedIn()
    const answers: unknown[] = []
    for (let request = 0; request < 6; request++) {
      const answer = await call('POST', '/step-ups', {}, pumper.auth)
      answers.push([answer.status, answer.body?.code ?? null])
      later(31)
    }
    expect(answers).to.deep.equal([...Array(5).fill([202, null]), [429, 'identity_rate_limited']])
    expect(await sentTo(pumper.email)).to.equal(5)
  })

  it('mail bombing through +tag variants: victim+1…victim+6 share the victim’s five codes an hour, each sent to the address as written', async () => {
    const [local, domain] = uniqueEmail('victim').split('@')
    const variants = Array.from({ length: 6 }, (_, i) => `${local}+${i + 1}@${domain}`)
    const bomber = await signedIn()
    const elevated = await elevate(bomber)
    const statuses = []
    for (const variant of variants) statuses.push((await call('POST', '/sign-in-methods', { identifier: variant.toUpperCase() }, elevated)).status)
    expect(statuses).to.deep.equal([202, 202, 202, 202, 202, 429])
    for (const variant of variants.slice(0, 5)) expect(await sentTo(variant), variant).to.equal(1)
    expect(await sentTo(variants[5]!)).to.equal(0)
  })

  it('code guessing beyond the daily budget: after 15 wrong codes no recovery code verifies until the day has passed, with the ordinary answer', async () => {
    const victim = uniqueEmail('guessed')
    await createVerifiedIdentity(f.db.owner, victim)
    const complete = (guess: string) => call('POST', '/password-recoveries/completion', { identifier: victim, code: guess, newPassword: 'a brand new passphrase' })
    for (let round = 0; round < 3; round++) {
      expect((await call('POST', '/password-recoveries', { identifier: victim })).status).to.equal(202)
      const right = await code(victim)
      for (let guess = 0; guess < 5; guess++) expect((await complete(wrongFor(right))).status).to.equal(422)
      later(31)
    }
    expect((await call('POST', '/password-recoveries', { identifier: victim })).status).to.equal(202)
    const refused = await complete(await code(victim))
    expect([refused.status, refused.body?.code, refused.headers.get('retry-after')], 'even the right code, and no hint why').to.deep.equal([422, 'invalid_code', null])

    later(86_400)
    expect((await call('POST', '/password-recoveries', { identifier: victim })).status).to.equal(202)
    expect((await complete(await code(victim))).status, 'a day later').to.equal(204)
  })

  it('code guessing on a signed-in route: past the budget the right step-up code is refused with 429 and Retry-After', async () => {
    const guesser = await signedIn()
    for (let round = 0; round < 3; round++) {
      expect((await call('POST', '/step-ups', {}, guesser.auth)).status).to.equal(202)
      const right = await code(guesser.email)
      for (let guess = 0; guess < 5; guess++) expect((await call('POST', '/step-ups/confirmation', { code: wrongFor(right) }, guesser.auth)).status).to.equal(422)
      later(31)
    }
    expect((await call('POST', '/step-ups', {}, guesser.auth)).status).to.equal(202)
    const refused = await call('POST', '/step-ups/confirmation', { code: await code(guesser.email) }, guesser.auth)
    expect(refused.status).to.equal(429)
    expect(refused.body).to.include({ code: 'too_many_wrong_codes' })
    expect(Number(refused.headers.get('retry-after'))).to.be.within(86_000, 86_400)
  })
})
