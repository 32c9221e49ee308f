import { expect } from 'chai'
import { createVerifiedIdentity, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { useIdentityKit } from './support/identity-kit.ts'

/**
 * Attacks that keep the rightful owner out (issue "the rightful owner always gets in"): a stranger
 * spends what the owner needs next — the destination's codes, the wrong-code budget, the sign-in
 * budget. Each is performed from the stranger's own client addresses (the router's
 * X-Forwarded-For, TRUST_PROXY 1) and fails if the owner is locked out.
 */
describe('attacks on the owner’s budgets', () => {
  const { f, call, code, later, wrongFor } = useIdentityKit({ trustProxy: 1 })
  const from = (address: string, extra: Record<string, string> = {}) => ({ 'x-forwarded-for': address, ...extra })
  const stranger = (n: number) => from(`198.51.100.${n}`)
  const owner = from('203.0.113.9')
  const password = 'the owner chose this passphrase'
  const newPassword = 'a brand new passphrase of hers'

  /** An owner who signed up and confirmed through the routes, from the owner's client: the device cookie it was given. */
  async function signedUpOwner(address: string): Promise<string | undefined> {
    expect((await call('POST', '/sign-ups', { identifier: address, password }, owner)).status).to.equal(202)
    const confirmed = await call('POST', '/sign-ups/confirmation', { identifier: address, code: await code(address), password }, owner)
    expect(confirmed.status).to.equal(201)
    return deviceCookie(confirmed.headers)
  }
  const deviceCookie = (headers: Headers) =>
    headers
      .getSetCookie()
      .map((cookie) => cookie.split(';')[0]!)
      .find((cookie) => cookie.startsWith('sealpost_device='))

  const messagesTo = async (address: string) => await f.db.owner('outbox.security_outbox_messages').where({ destination: address })

  it('variants that send nothing still spend the owner’s budget: five recoveries for alice+1…5 leave alice’s own recovery sent', async () => {
    const alice = uniqueEmail('alice')
    await createVerifiedIdentity(f.db.owner, alice)
    const [local, domain] = alice.split('@')
    for (let i = 1; i <= 5; i++)
      expect((await call('POST', '/password-recoveries', { identifier: `${local}+${i}@${domain}` }, stranger(1))).status).to.equal(202)
    expect(await messagesTo(`${local}+1@${domain}`), 'nothing was sent for a variant').to.have.length(0)

    expect((await call('POST', '/password-recoveries', { identifier: alice }, owner)).status).to.equal(202)
    expect(await messagesTo(alice), 'the owner’s own recovery is sent').to.have.length(1)
    expect(
      (await call('POST', '/password-recoveries/completion', { identifier: alice, code: await code(alice), newPassword }, owner)).status,
    ).to.equal(204)
  })

  it('a stranger spends the owner’s wrong-code budget: fifteen wrong recovery codes leave the owner’s right one working', async () => {
    const alice = uniqueEmail('alice')
    await createVerifiedIdentity(f.db.owner, alice)
    for (let round = 0; round < 3; round++) {
      expect((await call('POST', '/password-recoveries', { identifier: alice }, stranger(2))).status).to.equal(202)
      const right = await code(alice)
      for (let guess = 0; guess < 5; guess++)
        expect(
          (await call('POST', '/password-recoveries/completion', { identifier: alice, code: wrongFor(right), newPassword }, stranger(2)))
            .status,
        ).to.equal(422)
      later(31)
    }
    expect((await call('POST', '/password-recoveries', { identifier: alice }, owner)).status).to.equal(202)
    expect(
      (await call('POST', '/password-recoveries/completion', { identifier: alice, code: await code(alice), newPassword }, owner)).status,
      'the owner’s right code',
    ).to.equal(204)
  })

  it('ten wrong passwords from anywhere lock out the right one: the owner still signs in', async () => {
    const alice = uniqueEmail('alice')
    await signedUpOwner(alice)
    for (let guess = 0; guess < 10; guess++)
      expect((await call('POST', '/sessions', { identifier: alice, password: `guess number ${guess}` }, stranger(3))).status).to.equal(401)
    expect((await call('POST', '/sessions', { identifier: alice, password }, owner)).status, 'the owner’s right password').to.equal(201)
  })

  it('a stranger spread over many addresses exhausts every anonymous budget, and the owner’s client that signed in before still signs in, recovers and steps up', async () => {
    const alice = uniqueEmail('alice')
    const cookie = await signedUpOwner(alice)
    expect(cookie, 'the confirmation set a device cookie').to.be.a('string')
    const attributes = (await call('POST', '/sessions', { identifier: alice, password }, owner)).headers
      .getSetCookie()
      .find((header) => header.startsWith('sealpost_device='))!
      .split(';')
      .map((attribute) => attribute.trim().split('=')[0]!.toLowerCase())
    expect(attributes, 'no script reads it, no other site sends it').to.include.members(['httponly', 'samesite', 'path', 'max-age'])
    expect(attributes, 'plain http in tests; Secure in staging and production (device-cookie test)').not.to.include('secure')
    // The owner's client keeps its cookie jar as a browser does: each answer that renews the cookie replaces it.
    let jar = cookie!
    const device = () => from('203.0.113.77', { cookie: jar })
    const kept = <T extends { headers: Headers }>(answer: T) => {
      jar = deviceCookie(answer.headers) ?? jar
      return answer
    }
    const [local, domain] = alice.split('@')
    // Attacks 4–6 from four addresses, each spending all its slice: recoveries for variants of the
    // mailbox and for the mailbox itself, five wrong codes against the challenge each opens, and
    // five wrong passwords — together past every ceiling an anonymous client shares.
    for (let n = 10; n < 14; n++) {
      expect((await call('POST', '/password-recoveries', { identifier: alice }, stranger(n))).status).to.equal(202)
      const right = await code(alice)
      for (let variant = 0; variant < 3; variant++)
        await call('POST', '/password-recoveries', { identifier: `${local}+${n}.${variant}@${domain}` }, stranger(n))
      for (let guess = 0; guess < 5; guess++)
        await call('POST', '/password-recoveries/completion', { identifier: alice, code: wrongFor(right), newPassword }, stranger(n))
      for (let guess = 0; guess < 5; guess++)
        await call('POST', '/sessions', { identifier: alice, password: `guess ${n}.${guess}` }, stranger(n))
      later(31)
    }
    // Every anonymous budget is spent: a client that never signed in is refused even the right password, and gets no code.
    const fresh = from('192.0.2.200')
    expect((await call('POST', '/sessions', { identifier: alice, password }, fresh)).status, 'the sign-in ceiling is spent').to.equal(401)
    const sentBefore = (await messagesTo(alice)).length
    expect((await call('POST', '/password-recoveries', { identifier: alice }, fresh)).status).to.equal(202)
    expect(await messagesTo(alice), 'the destination ceiling is spent').to.have.length(sentBefore)
    later(31)

    const session = kept(await call('POST', '/sessions', { identifier: alice, password }, device()))
    expect(session.status, 'the owner signs in from the client that signed in before').to.equal(201)
    const before = (await messagesTo(alice)).length
    expect((await call('POST', '/password-recoveries', { identifier: alice }, device())).status).to.equal(202)
    expect(await messagesTo(alice), 'the owner’s recovery code is sent').to.have.length(before + 1)
    const right = await code(alice)
    expect(
      (await call('POST', '/password-recoveries/completion', { identifier: alice, code: right, newPassword }, fresh)).status,
      'the wrong-code ceiling is spent: from a client that never signed in even the right code is refused',
    ).to.equal(422)
    expect(
      kept(await call('POST', '/password-recoveries/completion', { identifier: alice, code: right, newPassword }, device())).status,
      'and from the owner’s client it works',
    ).to.equal(204)
    const again = kept(await call('POST', '/sessions', { identifier: alice, password: newPassword }, device()))
    expect(again.status, 'signed in with the new password (the recovery trusted this client anew)').to.equal(201)
    const auth = { ...device(), authorization: `Bearer ${String(again.body!.token)}` }
    expect((await call('POST', '/step-ups', {}, auth)).status).to.equal(202)
    expect((await call('POST', '/step-ups/confirmation', { code: await code(alice) }, auth)).status, 'and steps up').to.equal(201)
  })
})

describe('attacks through a sign-in method added later', () => {
  const { f, call, code, later, elevate } = useIdentityKit()
  const password = 'the owner chose this passphrase'

  /** An owner who signed up with a phone (the primary identifier) and is signed in: the bearer header. */
  async function phoneOwner() {
    const phone = uniquePhone()
    expect((await call('POST', '/sign-ups', { identifier: phone, password })).status).to.equal(202)
    const confirmed = await call('POST', '/sign-ups/confirmation', { identifier: phone, code: await code(phone), password })
    expect(confirmed.status).to.equal(201)
    return { phone, auth: { authorization: `Bearer ${String(confirmed.body!.token)}` } }
  }
  /** Where the next step-up code goes: the destination of the newest step-up message (uuid v7 ids grow). */
  const stepUpGoesTo = async (auth: Record<string, string>) => {
    expect((await call('POST', '/step-ups', {}, auth)).status).to.equal(202)
    const message = await f.db
      .owner('outbox.security_outbox_messages')
      .where({ purpose: 'step_up' })
      .orderBy('id', 'desc')
      .first('destination')
    return message.destination as string
  }

  it('a stolen session spends the owner’s step-up guesses: after the owner recovers, the owner steps up again at once', async () => {
    const owner = await phoneOwner()
    // The thief holds a session (the bearer token) and guesses step-up codes until the identity's day is spent.
    for (let round = 0; round < 3; round++) {
      expect((await call('POST', '/step-ups', {}, owner.auth)).status).to.equal(202)
      for (let guess = 0; guess < 5; guess++)
        await call('POST', '/step-ups/confirmation', { code: `${200000 + round * 10 + guess}` }, owner.auth)
      later(31)
    }
    expect((await call('POST', '/step-ups', {}, owner.auth)).status).to.equal(202)
    const locked = await call('POST', '/step-ups/confirmation', { code: await code(owner.phone) }, owner.auth)
    expect([locked.status, locked.body?.code], 'the guesses are spent').to.deep.equal([429, 'too_many_wrong_codes'])

    // The owner recovers through the phone (which revokes the thief's session), signs in and steps up.
    later(31)
    const newPassword = 'the owner’s brand new passphrase'
    expect((await call('POST', '/password-recoveries', { identifier: owner.phone })).status).to.equal(202)
    expect(
      (await call('POST', '/password-recoveries/completion', { identifier: owner.phone, code: await code(owner.phone), newPassword }))
        .status,
    ).to.equal(204)
    expect((await call('POST', '/step-ups', {}, owner.auth)).status, 'the thief’s session is gone').to.equal(401)
    const session = await call('POST', '/sessions', { identifier: owner.phone, password: newPassword })
    const auth = { authorization: `Bearer ${String(session.body!.token)}` }
    expect((await call('POST', '/step-ups', {}, auth)).status).to.equal(202)
    expect(
      (await call('POST', '/step-ups/confirmation', { code: await code(owner.phone) }, auth)).status,
      'the owner steps up at once',
    ).to.equal(201)
  })

  it('a sign-in method added later captures the step-up codes: they keep going to the primary identifier', async () => {
    const owner = await phoneOwner()
    // Whoever got past one step-up (a phished code, a session left open) adds an email address of theirs.
    const elevated = await elevate({ email: owner.phone, auth: owner.auth })
    const added = uniqueEmail('intruder')
    expect((await call('POST', '/sign-in-methods', { identifier: added }, elevated)).status).to.equal(202)
    expect(
      (await call('POST', '/sign-in-methods/confirmation', { identifier: added, code: await code(added) }, owner.auth)).status,
    ).to.equal(201)
    expect(await stepUpGoesTo(owner.auth), 'the next step-up code goes to the primary phone, not the added email').to.equal(owner.phone)
  })

  it('removing a sign-in method: needs a fresh step-up, never takes the primary identifier, tells every identifier, and the removed one no longer signs in', async () => {
    const owner = await phoneOwner()
    const second = uniqueEmail('second')
    expect(
      (await call('POST', '/sign-in-methods', { identifier: second }, await elevate({ email: owner.phone, auth: owner.auth }))).status,
    ).to.equal(202)
    expect(
      (await call('POST', '/sign-in-methods/confirmation', { identifier: second, code: await code(second) }, owner.auth)).status,
    ).to.equal(201)
    expect((await call('POST', '/sessions', { identifier: second, password })).status).to.equal(201)

    const refused = await call('POST', '/sign-in-methods/removals', { identifier: second }, owner.auth)
    expect([refused.status, refused.body?.code], 'a bearer token alone').to.deep.equal([403, 'elevation_required'])
    const elevated = await elevate({ email: owner.phone, auth: owner.auth })
    const primary = await call('POST', '/sign-in-methods/removals', { identifier: owner.phone }, elevated)
    expect([primary.status, primary.body?.code]).to.deep.equal([409, 'primary_identifier'])
    const someoneElses = uniqueEmail('someone')
    await createVerifiedIdentity(f.db.owner, someoneElses)
    const notMine = await call('POST', '/sign-in-methods/removals', { identifier: someoneElses }, elevated)
    const nobodys = await call('POST', '/sign-in-methods/removals', { identifier: uniqueEmail('nobody') }, elevated)
    expect([notMine.status, notMine.body?.code]).to.deep.equal([404, 'sign_in_method_not_found'])
    expect([nobodys.status, nobodys.body?.code], 'another account’s identifier answers like nobody’s').to.deep.equal([
      notMine.status,
      notMine.body?.code,
    ])
    expect(await call('POST', '/sign-in-methods/removals', { identifier: 'not an identifier' }, elevated)).to.include({ status: 422 })

    const noticesBefore = await f.db
      .owner('outbox.security_outbox_messages')
      .where({ purpose: 'security_notice' })
      .whereIn('destination', [owner.phone, second])
    expect((await call('POST', '/sign-in-methods/removals', { identifier: second }, elevated)).status).to.equal(204)
    const notices = await f.db
      .owner('outbox.security_outbox_messages')
      .where({ purpose: 'security_notice' })
      .whereIn('destination', [owner.phone, second])
    expect(notices.length - noticesBefore.length, 'a notice to the primary and to the removed address').to.equal(2)
    expect((await call('POST', '/sessions', { identifier: second, password })).status, 'the removed address no longer signs in').to.equal(
      401,
    )
    expect((await call('POST', '/sessions', { identifier: owner.phone, password })).status).to.equal(201)
  })
})
