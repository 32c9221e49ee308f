import { expect } from 'chai'
import { canonicalDestination, maskIdentifier } from '../src/identity/identifiers.ts'
import { createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { useIdentityKit } from './support/identity-kit.ts'
import { newestSealed } from './support/sealed-codes.ts'
import { useWebStack } from './support/web-stack.ts'

/**
 * Each attack of the threat model on the identity flows, performed step by step through the real
 * routes the way an attacker would; each test fails if the attack works.
 */
const METRICS_TOKEN = 'metrics-token-of-the-attack-tests'

describe('attacks on the identity flows', () => {
  const kit = useIdentityKit({ metricsToken: METRICS_TOKEN })
  const { f, call, code, later, wrongFor, signedIn, elevate } = kit
  const answerShape = (answer: Awaited<ReturnType<typeof call>>) =>
    JSON.stringify([
      answer.status,
      answer.body?.code ?? null,
      Object.keys(answer.body ?? {}).sort(),
      answer.headers.get('retry-after') !== null,
    ])

  it('pre-account hijacking: a second sign-up after the victim’s cannot activate the account with the attacker’s password', async () => {
    const address = uniqueEmail('victim')
    const victimPassword = 'the victim chose this'
    const attackerPassword = 'the attacker chose this'
    expect((await call('POST', '/sign-ups', { identifier: address, password: victimPassword })).status).to.equal(202)
    later(31)
    // The attacker repeats the sign-up: a resend that makes their password the candidate.
    expect((await call('POST', '/sign-ups', { identifier: address, password: attackerPassword })).status).to.equal(202)
    // The victim types the newest code in their inbox, with their own password.
    const refused = await call('POST', '/sign-ups/confirmation', {
      identifier: address,
      code: await code(address),
      password: victimPassword,
    })
    expect(refused).to.deep.include({ status: 422 })
    expect(refused.body).to.include({ code: 'invalid_code' })
    expect(
      (await call('POST', '/sessions', { identifier: address, password: attackerPassword })).status,
      'the attacker cannot sign in',
    ).to.equal(401)
    const challenge = await f.db.owner('identity.challenges').where({ purpose: 'sign_up' }).orderBy('created_at', 'desc').first()
    expect(challenge.attempts_left, 'the mismatch spent an attempt').to.equal(4)

    // The victim asks again and confirms; the account is theirs alone.
    later(31)
    expect((await call('POST', '/sign-ups', { identifier: address, password: victimPassword })).status).to.equal(202)
    expect(
      (await call('POST', '/sign-ups/confirmation', { identifier: address, code: await code(address), password: victimPassword })).status,
    ).to.equal(201)
    expect((await call('POST', '/sessions', { identifier: address, password: victimPassword })).status).to.equal(201)
    expect((await call('POST', '/sessions', { identifier: address, password: attackerPassword })).status).to.equal(401)
  })

  it('pre-account hijacking, other order: an attacker’s sign-up before the victim’s cannot be activated by the victim’s code', async () => {
    const address = uniqueEmail('victim')
    const victimPassword = 'the victim chose this'
    const attackerPassword = 'the attacker chose this'
    expect((await call('POST', '/sign-ups', { identifier: address, password: attackerPassword })).status).to.equal(202)
    // The victim signs up within the resend interval: the same 202, and the attacker's password stays the candidate.
    later(5)
    expect((await call('POST', '/sign-ups', { identifier: address, password: victimPassword })).status).to.equal(202)
    const refused = await call('POST', '/sign-ups/confirmation', {
      identifier: address,
      code: await code(address),
      password: victimPassword,
    })
    expect(refused.status).to.equal(422)
    expect(
      (await call('POST', '/sessions', { identifier: address, password: attackerPassword })).status,
      'the attacker cannot sign in',
    ).to.equal(401)

    later(31)
    expect((await call('POST', '/sign-ups', { identifier: address, password: victimPassword })).status).to.equal(202)
    expect(
      (await call('POST', '/sign-ups/confirmation', { identifier: address, code: await code(address), password: victimPassword })).status,
    ).to.equal(201)
    expect((await call('POST', '/sessions', { identifier: address, password: attackerPassword })).status).to.equal(401)
    expect((await call('POST', '/sessions', { identifier: address, password: victimPassword })).status).to.equal(201)
  })

  it('enumeration through POST /sign-in-methods: an address another account verified answers like a free one, request after request', async () => {
    const taken = uniqueEmail('taken')
    await createVerifiedIdentity(f.db.owner, taken)
    const free = uniqueEmail('free')
    const first = await signedIn()
    const second = await signedIn()
    const asFirst = await elevate(first)
    const asSecond = await elevate(second)

    const sequence = async (identifier: string, headers: Record<string, string>) => {
      const shapes: string[] = []
      shapes.push(answerShape(await call('POST', '/sign-in-methods', { identifier }, headers)))
      shapes.push(answerShape(await call('POST', '/sign-in-methods', { identifier }, headers)))
      return shapes
    }
    const forTaken = await sequence(taken, asFirst)
    const forFree = await sequence(free, asSecond)
    expect(forTaken).to.deep.equal(forFree)
    expect(forFree[1]).to.include('resend_too_soon')
  })

  it('enumeration through GET /metrics: an unauthenticated caller reads no counts, so a recovery for a known address changes nothing it can see', async () => {
    const known = uniqueEmail('known')
    await createVerifiedIdentity(f.db.owner, known)
    const scrape = async (headers: Record<string, string> = {}) => {
      const response = await fetch(`${f.stack.web.url}/metrics`, { headers })
      return { status: response.status, text: await response.text() }
    }
    const pending = (text: string) => Number(/sealpost_outbox_messages\{state="pending"\} (\d+)/.exec(text)?.[1])
    const operator = { authorization: `Bearer ${METRICS_TOKEN}` }
    const [strangerBefore, operatorBefore] = [await scrape(), await scrape(operator)]
    expect(strangerBefore.status).to.equal(401)
    expect(strangerBefore.text).not.to.include('sealpost_outbox_messages')

    expect((await call('POST', '/password-recoveries', { identifier: known })).status).to.equal(202)
    expect(await scrape(), 'the stranger sees the same answer after').to.deep.equal(strangerBefore)
    expect((await scrape({ authorization: 'Bearer not-the-metrics-token' })).status).to.equal(401)
    const operatorAfter = await scrape(operator)
    expect(operatorAfter.status).to.equal(200)
    expect(pending(operatorAfter.text), 'the operator with the token sees the new message').to.equal(pending(operatorBefore.text) + 1)
  })

  it('a stolen session made permanent: adding a sign-in method needs a fresh step-up, and the owner hears of every change', async () => {
    const owner = await signedIn(uniqueEmail('owner'))
    const attackerAddress = uniqueEmail('attacker')
    // With the bearer token alone the attacker cannot add their address...
    const refused = await call('POST', '/sign-in-methods', { identifier: attackerAddress }, owner.auth)
    expect(refused.status).to.equal(403)
    expect(refused.body).to.include({ code: 'elevation_required' })
    // ...nor with an elevation token of another session of theirs.
    const other = await signedIn()
    const foreign = await elevate(other)
    expect(
      (
        await call(
          'POST',
          '/sign-in-methods',
          { identifier: attackerAddress },
          { ...owner.auth, 'x-elevation-token': foreign['x-elevation-token'] },
        )
      ).status,
    ).to.equal(403)
    expect(
      await f.db.owner('outbox.security_outbox_messages').where({ destination: attackerAddress }),
      'nothing was sent to the attacker',
    ).to.have.length(0)

    // The owner, stepped up, adds a second address; the first address is told, without a secret.
    const added = uniqueEmail('second')
    const elevated = await elevate(owner)
    expect((await call('POST', '/sign-in-methods', { identifier: added }, elevated)).status).to.equal(202)
    expect(
      (await call('POST', '/sign-in-methods/confirmation', { identifier: added, code: await code(added) }, owner.auth)).status,
    ).to.equal(201)
    const notice = await newestSealed(f.db, f.keys, owner.email)
    expect(notice.purpose).to.equal('security_notice')
    const body = JSON.parse(notice.text) as Record<string, string>
    expect(body).to.include({ event: 'sign_in_method_added' })
    expect(body.identifier).to.be.a('string').and.not.to.include(added.split('@')[0]!)
    const row = await f.db.owner('outbox.security_outbox_messages').where({ id: notice.messageId }).first()
    expect(row).to.include({ challenge_id: null, invitation_id: null, channel: 'email' })
    expect(new Date(row.expires_at).getTime() - kit.now().getTime()).to.be.within(23 * 3_600_000, 24 * 3_600_000 + 1_000)

    // A completed password recovery through the new address tells the other one too.
    expect((await call('POST', '/password-recoveries', { identifier: added })).status).to.equal(202)
    expect(
      (
        await call('POST', '/password-recoveries/completion', {
          identifier: added,
          code: await code(added),
          newPassword: 'a brand new passphrase',
        })
      ).status,
    ).to.equal(204)
    const second = await newestSealed(f.db, f.keys, owner.email)
    expect(second.messageId).not.to.equal(notice.messageId)
    expect(JSON.parse(second.text)).to.include({ event: 'password_changed' })
  })

  it('a challenge killed by its last wrong attempt keeps no unsent message alive', async () => {
    const known = uniqueEmail('guessed')
    await createVerifiedIdentity(f.db.owner, known)
    await call('POST', '/password-recoveries', { identifier: known })
    const right = await code(known)
    for (let guess = 0; guess < 5; guess++) {
      expect(
        (
          await call('POST', '/password-recoveries/completion', {
            identifier: known,
            code: wrongFor(right),
            newPassword: 'a brand new passphrase',
          })
        ).status,
      ).to.equal(422)
    }
    const [message] = await f.db.owner('outbox.security_outbox_messages').where({ destination: known })
    expect(message.state).to.equal('dead_lettered')
    expect(await f.db.owner('outbox.security_outbox_dead_letters').where({ message_id: message.id }).first()).to.include({
      reason: 'challenge_consumed',
    })
    expect(await f.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: message.id })).to.have.length(0)
  })
})

describe('identifiers as notices show them', () => {
  const f = useWebStack({ worker: false })

  it('masks an identifier in code exactly as the database masks a destination', async () => {
    for (const value of ['alice@example.com', 'a@b.co', 'bob.smith+tag@mail.example.org', '+4915112345678', '+12025550123']) {
      const { rows } = await f.db.owner.raw<{ rows: { masked: string }[] }>('SELECT outbox.mask_destination(?) AS masked', [value])
      expect(maskIdentifier(value), value).to.equal(rows[0]!.masked)
      expect(maskIdentifier(value)).to.include('•').and.not.to.equal(value)
    }
  })

  it('counts a destination budget on the canonical mailbox: case and +tag removed, phones as they are', () => {
    expect(canonicalDestination({ kind: 'email', value: 'victim+1@example.com' })).to.equal('victim@example.com')
    expect(canonicalDestination({ kind: 'email', value: 'victim+a+b@example.com' })).to.equal('victim@example.com')
    expect(canonicalDestination({ kind: 'email', value: 'Victim@Example.com' })).to.equal('victim@example.com')
    expect(canonicalDestination({ kind: 'phone', value: '+4915112345678' })).to.equal('+4915112345678')
  })
})
