import { expect } from 'chai'
import { createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { useIdentityKit } from './support/identity-kit.ts'

/** Pumping, mail bombing and guessing from one account, performed through the real routes. */
describe('abuse of the code-sending routes', () => {
  const { f, call, code, later, wrongFor, signedIn, elevate } = useIdentityKit()
  const sentTo = async (destination: string) => (await f.db.owner('outbox.security_outbox_messages').where({ destination })).length

  it('pumping from one session: the 11th sign-in method an identity adds within the hour is refused with 429 and nothing is sent', async () => {
    const pumper = await signedIn()
    const elevated = await elevate(pumper)
    const targets = Array.from({ length: 11 }, () => uniqueEmail('target'))
    for (const target of targets.slice(0, 10))
      expect((await call('POST', '/sign-in-methods', { identifier: target }, elevated)).status).to.equal(202)
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
    for (const variant of variants)
      statuses.push((await call('POST', '/sign-in-methods', { identifier: variant.toUpperCase() }, elevated)).status)
    expect(statuses).to.deep.equal([202, 202, 202, 202, 202, 429])
    for (const variant of variants.slice(0, 5)) expect(await sentTo(variant), variant).to.equal(1)
    expect(await sentTo(variants[5]!)).to.equal(0)
  })

  it('code guessing beyond the daily budget: after 15 wrong codes no recovery code verifies until the day has passed, with the ordinary answer', async () => {
    const victim = uniqueEmail('guessed')
    await createVerifiedIdentity(f.db.owner, victim)
    const complete = (guess: string) =>
      call('POST', '/password-recoveries/completion', { identifier: victim, code: guess, newPassword: 'a brand new passphrase' })
    for (let round = 0; round < 3; round++) {
      expect((await call('POST', '/password-recoveries', { identifier: victim })).status).to.equal(202)
      const right = await code(victim)
      for (let guess = 0; guess < 5; guess++) expect((await complete(wrongFor(right))).status).to.equal(422)
      later(31)
    }
    expect((await call('POST', '/password-recoveries', { identifier: victim })).status).to.equal(202)
    const refused = await complete(await code(victim))
    expect([refused.status, refused.body?.code, refused.headers.get('retry-after')], 'even the right code, and no hint why').to.deep.equal([
      422,
      'invalid_code',
      null,
    ])

    later(86_400)
    expect((await call('POST', '/password-recoveries', { identifier: victim })).status).to.equal(202)
    expect((await complete(await code(victim))).status, 'a day later').to.equal(204)
  })

  it('code guessing on a signed-in route: past the budget the right step-up code is refused with 429 and Retry-After', async () => {
    const guesser = await signedIn()
    for (let round = 0; round < 3; round++) {
      expect((await call('POST', '/step-ups', {}, guesser.auth)).status).to.equal(202)
      const right = await code(guesser.email)
      for (let guess = 0; guess < 5; guess++)
        expect((await call('POST', '/step-ups/confirmation', { code: wrongFor(right) }, guesser.auth)).status).to.equal(422)
      later(31)
    }
    expect((await call('POST', '/step-ups', {}, guesser.auth)).status).to.equal(202)
    const refused = await call('POST', '/step-ups/confirmation', { code: await code(guesser.email) }, guesser.auth)
    expect(refused.status).to.equal(429)
    expect(refused.body).to.include({ code: 'too_many_wrong_codes' })
    expect(Number(refused.headers.get('retry-after'))).to.be.within(86_000, 86_400)
  })
})

/** Found by an adversarial review of the identity flows: each performs the attack as it was found. */
describe('attacks on the shared budgets', () => {
  const { f, call, code, later, signedIn, elevate } = useIdentityKit({ trustProxy: 1 })

  it('enumeration through the destination budget: recoveries for a known and an unknown address leave a later probe the same answer', async () => {
    const prober = await signedIn()
    const probe = async (address: string) => {
      for (let request = 0; request < 5; request++) {
        expect((await call('POST', '/password-recoveries', { identifier: address })).status).to.equal(202)
        later(31)
      }
      const [local, domain] = address.split('@')
      const answer = await call('POST', '/sign-in-methods', { identifier: `${local}+probe@${domain}` }, await elevate(prober))
      return [answer.status, answer.body?.code ?? null]
    }
    const known = uniqueEmail('known')
    await createVerifiedIdentity(f.db.owner, known)
    expect(await probe(known)).to.deep.equal(await probe(uniqueEmail('unknown')))
  })

  it('locking an owner out of step-up: five anonymous recoveries for the address leave the owner’s step-up working', async () => {
    const owner = await signedIn()
    for (let request = 0; request < 5; request++) {
      await call('POST', '/password-recoveries', { identifier: owner.email })
      later(31)
    }
    expect((await call('POST', '/step-ups', {}, owner.auth)).status).to.equal(202)
  })

  it('locking an owner out of recovery: fifteen wrong completions while no challenge is open do not spend the owner’s budget', async () => {
    const owner = uniqueEmail('owner')
    await createVerifiedIdentity(f.db.owner, owner)
    const complete = (guess: string) =>
      call('POST', '/password-recoveries/completion', { identifier: owner, code: guess, newPassword: 'a brand new passphrase' })
    for (let guess = 0; guess < 15; guess++) expect((await complete('000000')).status).to.equal(422)
    expect((await call('POST', '/password-recoveries', { identifier: owner })).status).to.equal(202)
    expect((await complete(await code(owner))).status).to.equal(204)
  })

  it('locking a person out of sign-up: an attacker’s wrong confirmations of a pending sign-up do not lock the person who signs up next from their own network', async () => {
    const address = uniqueEmail('person')
    const attacker = 'the attacker chose this'
    const person = 'the person chose this'
    const fromAttacker = { 'x-forwarded-for': '198.51.100.1' }
    const fromPerson = { 'x-forwarded-for': '203.0.113.1' }
    for (let round = 0; round < 3; round++) {
      await call('POST', '/sign-ups', { identifier: address, password: attacker }, fromAttacker)
      for (let guess = 0; guess < 5; guess++)
        await call('POST', '/sign-ups/confirmation', { identifier: address, code: '000000', password: attacker }, fromAttacker)
      later(31)
    }
    expect((await call('POST', '/sign-ups', { identifier: address, password: person }, fromPerson)).status).to.equal(202)
    expect(
      (await call('POST', '/sign-ups/confirmation', { identifier: address, code: await code(address), password: person }, fromPerson))
        .status,
    ).to.equal(201)
  })

  it('guessing a sign-up code under ever new candidate passwords: the address’s guesses are bounded across candidates, not per candidate', async () => {
    const address = uniqueEmail('person')
    const fromAttacker = { 'x-forwarded-for': '198.51.100.2' }
    // Each round a new candidate password (a new sign-up request) — once a fresh budget per candidate.
    for (let round = 0; round < 3; round++) {
      const candidate = `the attacker's candidate ${round}`
      await call('POST', '/sign-ups', { identifier: address, password: candidate }, fromAttacker)
      for (let guess = 0; guess < 5; guess++)
        await call('POST', '/sign-ups/confirmation', { identifier: address, code: '000000', password: candidate }, fromAttacker)
      later(31)
    }
    // The attacker's own next sign-up, with the right code in hand, is refused: its guesses are spent.
    const last = 'the attacker chose this last'
    await call('POST', '/sign-ups', { identifier: address, password: last }, fromAttacker)
    const refused = await call(
      'POST',
      '/sign-ups/confirmation',
      { identifier: address, code: await code(address), password: last },
      fromAttacker,
    )
    expect(refused.status).to.equal(422)
  })

  it('mail bombing a Gmail mailbox through dot variants: they share its five codes an hour', async () => {
    const local = `bombed${Date.now() % 100_000}`
    const variants = Array.from({ length: 6 }, (_, i) => `${local.slice(0, i + 1)}.${local.slice(i + 1)}@gmail.com`)
    variants.push(`${local}@googlemail.com`)
    for (const variant of variants)
      expect((await call('POST', '/sign-ups', { identifier: variant, password: 'a long enough password' })).status).to.equal(202)
    const queued = await f.db.owner('outbox.security_outbox_messages').whereIn('destination', variants)
    expect(queued, 'five codes for the one mailbox').to.have.length(5)
  })

  it('guessing a password: after ten wrong ones in a quarter hour even the right password answers the same 401, for a known and an unknown identifier alike', async () => {
    const owner = uniqueEmail('owner')
    const password = 'the owner chose this one'
    await call('POST', '/sign-ups', { identifier: owner, password })
    await call('POST', '/sign-ups/confirmation', { identifier: owner, code: await code(owner), password })
    const unknown = uniqueEmail('nobody')
    for (const identifier of [owner, unknown]) {
      for (let guess = 0; guess < 10; guess++)
        expect((await call('POST', '/sessions', { identifier, password: `guess number ${guess}` })).status).to.equal(401)
    }
    const refused = await call('POST', '/sessions', { identifier: owner, password })
    expect([refused.status, refused.body?.code, refused.headers.get('retry-after')]).to.deep.equal([401, 'invalid_credentials', null])
    later(15 * 60)
    expect((await call('POST', '/sessions', { identifier: owner, password })).status, 'a quarter hour later').to.equal(201)
  })
})
