import { expect } from 'chai'
import { registerChannelsAsWorker } from './support/channels.ts'
import { createVerifiedIdentity, eventually, inbox, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

describe('security journeys, as a client makes them', () => {
  const f = useWebStack()

  const codeIn = (text: string | undefined) => /\b(\d{6})\b/.exec(text ?? '')?.[1]
  async function emailCode(address: string, nth: number): Promise<string> {
    const mails = await eventually(async () => {
      const found = await inbox(f.stack.emulator.url, address)
      return found.length >= nth ? found : undefined
    }, `email #${nth} to ${address}`)
    return codeIn(mails[nth - 1]!.body.text)!
  }
  async function whatsappCode(phone: string, nth: number): Promise<string> {
    const messages = await eventually(async () => {
      const found = f.stack.wasender.accepted().filter((request) => request.to === phone)
      return found.length >= nth ? found : undefined
    }, `WhatsApp message #${nth} to ${phone}`)
    return codeIn(messages[nth - 1]!.text)!
  }

  it('signs up, signs in, adds a phone, steps up and recovers the password', async () => {
    const email = uniqueEmail('journey')
    const phone = uniquePhone()
    const password = 'correct horse battery'

    // Sign up by email: the code arrives in the SES emulator.
    const signUp = await f.stack.call('POST', '/sign-ups', { identifier: email, password })
    expect(signUp.status).to.equal(202)
    expect(await f.stack.call('POST', '/sessions', { identifier: email, password }), 'no sign-in before confirmation').to.have.property(
      'status',
      401,
    )
    const confirmed = await f.stack.call('POST', '/sign-ups/confirmation', { identifier: email, code: await emailCode(email, 1), password })
    expect(confirmed.status).to.equal(201)
    const firstSession = confirmed.body!.token

    // Sign in with the password.
    const signedIn = await f.stack.call('POST', '/sessions', { identifier: email, password })
    expect(signedIn.status).to.equal(201)
    const session = f.stack.bearer(signedIn.body!.token)

    // Step up: the code goes to the verified email; the elevation lasts 5 minutes.
    expect((await f.stack.call('POST', '/step-ups', undefined, session)).status).to.equal(202)
    const elevation = await f.stack.call('POST', '/step-ups/confirmation', { code: await emailCode(email, 2) }, session)
    expect(elevation.status).to.equal(201)
    expect(elevation.body!.elevationToken).to.be.a('string').with.length.greaterThan(40)
    expect(new Date(String(elevation.body!.expiresAt)).getTime() - Date.now()).to.be.within(4 * 60_000, 5 * 60_000 + 1_000)

    // Add a phone, stepped up: the code arrives at the fake Wasender, and the email is told.
    const elevated = { ...session, 'x-elevation-token': String(elevation.body!.elevationToken) }
    expect((await f.stack.call('POST', '/sign-in-methods', { identifier: phone }, elevated)).status).to.equal(202)
    const added = await f.stack.call(
      'POST',
      '/sign-in-methods/confirmation',
      { identifier: phone, code: await whatsappCode(phone, 1) },
      session,
    )
    expect(added).to.deep.include({ status: 201, body: { identifier: phone, kind: 'phone' } })
    expect((await f.stack.call('POST', '/sessions', { identifier: phone, password })).status, 'the phone signs in too').to.equal(201)
    const notice = await eventually(async () => (await inbox(f.stack.emulator.url, email))[2], 'the security notice')
    expect(notice.subject).to.equal('Security notice: your Sealpost account changed')
    expect(notice.body.text)
      .to.include('A new sign-in method (')
      .and.to.include(`${phone.slice(0, 3)}`)
      .and.not.to.include(phone)
    expect(codeIn(notice.body.text), 'a notice carries no code').to.equal(undefined)

    // Recover the password: every old session stops working, the new password works.
    expect((await f.stack.call('POST', '/password-recoveries', { identifier: email })).status).to.equal(202)
    const newPassword = 'a brand new passphrase'
    expect(
      (await f.stack.call('POST', '/password-recoveries/completion', { identifier: email, code: await emailCode(email, 4), newPassword }))
        .status,
    ).to.equal(204)
    const phoneNotice = await eventually(
      async () => f.stack.wasender.accepted().filter((request) => request.to === phone)[1],
      'the phone’s notice',
    )
    expect(phoneNotice.text).to.include('The password of your Sealpost account was changed')
    expect((await f.stack.call('POST', '/step-ups', undefined, session)).status).to.equal(401)
    expect((await f.stack.call('DELETE', '/sessions/current', undefined, f.stack.bearer(firstSession))).status).to.equal(401)
    expect((await f.stack.call('POST', '/sessions', { identifier: email, password })).status).to.equal(401)
    const fresh = await f.stack.call('POST', '/sessions', { identifier: email, password: newPassword })
    expect(fresh.status).to.equal(201)
    expect((await f.stack.call('DELETE', '/sessions/current', undefined, f.stack.bearer(fresh.body!.token))).status).to.equal(204)
    expect((await f.stack.call('DELETE', '/sessions/current', undefined, f.stack.bearer(fresh.body!.token))).status).to.equal(401)

    const logged = f.logs.text()
    for (const secret of [email, phone, password, newPassword, String(signedIn.body!.token)]) expect(logged).not.to.include(secret)
  })

  it('answers a sign-up for a taken email like any other, and sends its owner a recovery code instead', async () => {
    const email = uniqueEmail('owner')
    await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'owner password 1' })
    await f.stack.call('POST', '/sign-ups/confirmation', {
      identifier: email,
      code: await emailCode(email, 1),
      password: 'owner password 1',
    })

    const again = await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'attacker password' })
    const fresh = await f.stack.call('POST', '/sign-ups', { identifier: uniqueEmail('fresh'), password: 'attacker password' })
    expect(again.status).to.equal(fresh.status).and.to.equal(202)
    expect(Object.keys(again.body!)).to.deep.equal(Object.keys(fresh.body!))
    const [, notice] = await eventually(async () => {
      const mails = await inbox(f.stack.emulator.url, email)
      return mails.length >= 2 ? mails : undefined
    }, 'the owner’s notice')
    expect(notice!.subject).to.equal('Your password recovery code')
    expect((await f.stack.call('POST', '/sessions', { identifier: email, password: 'attacker password' })).status).to.equal(401)
  })

  it('keeps the latest password when a sign-up is resent', async () => {
    const email = uniqueEmail('resend')
    await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'first password x' })
    const code = await emailCode(email, 1)
    await f.db
      .owner('identity.challenges')
      .where({ purpose: 'sign_up' })
      .update({ last_sent_at: new Date(Date.now() - 60_000) })
    await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'second password y' })
    const newest = await emailCode(email, 2)
    const confirm = (attempt: string, password: string) =>
      f.stack.call('POST', '/sign-ups/confirmation', { identifier: email, code: attempt, password })
    expect((await confirm(code, 'second password y')).status, 'the superseded code').to.equal(422)
    expect((await confirm(newest, 'first password x')).status, 'the newest code with the earlier password').to.equal(422)
    expect((await confirm(newest, 'second password y')).status).to.equal(201)
    expect((await f.stack.call('POST', '/sessions', { identifier: email, password: 'first password x' })).status).to.equal(401)
    expect((await f.stack.call('POST', '/sessions', { identifier: email, password: 'second password y' })).status).to.equal(201)
  })

  it('answers 409 identifier_taken to the second of two accounts confirming the same address', async () => {
    const shared = uniqueEmail('shared')
    const sessions = []
    for (const name of ['first', 'second']) {
      const email = uniqueEmail(name)
      await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'long enough password' })
      const confirmed = await f.stack.call('POST', '/sign-ups/confirmation', {
        identifier: email,
        code: await emailCode(email, 1),
        password: 'long enough password',
      })
      const session = f.stack.bearer(confirmed.body!.token)
      await f.stack.call('POST', '/step-ups', {}, session)
      const elevation = await f.stack.call('POST', '/step-ups/confirmation', { code: await emailCode(email, 2) }, session)
      sessions.push({ ...session, 'x-elevation-token': String(elevation.body!.elevationToken) })
    }
    expect((await f.stack.call('POST', '/sign-in-methods', { identifier: shared }, sessions[0])).status).to.equal(202)
    const firstCode = await emailCode(shared, 1)
    expect((await f.stack.call('POST', '/sign-in-methods', { identifier: shared }, sessions[1])).status).to.equal(202)
    const secondCode = await emailCode(shared, 2)
    expect(
      (await f.stack.call('POST', '/sign-in-methods/confirmation', { identifier: shared, code: firstCode }, sessions[0])).status,
    ).to.equal(201)
    const second = await f.stack.call('POST', '/sign-in-methods/confirmation', { identifier: shared, code: secondCode }, sessions[1])
    expect(second.status).to.equal(409)
    expect(second.body).to.include({ code: 'identifier_taken' })
  })

  it('publishes an OpenAPI document generated from the request schemas', async () => {
    const { status, body } = await f.stack.call('GET', '/openapi.json')
    expect(status).to.equal(200)
    const paths = body!.paths as Record<
      string,
      Record<string, { requestBody?: { content: Record<string, { schema: { properties?: object; additionalProperties?: boolean } }> } }>
    >
    expect(Object.keys(paths)).to.include.members(['/sign-ups', '/sessions', '/password-recoveries', '/step-ups/confirmation'])
    const signUpSchema = paths['/sign-ups']!.post!.requestBody!.content['application/json']!.schema
    expect(signUpSchema.properties).to.have.keys('identifier', 'password')
    expect(signUpSchema.additionalProperties).to.equal(false)
  })
})

describe('a deployment without WhatsApp (an email-only worker registered)', () => {
  const f = useWebStack({ worker: false, whatsapp: false })
  /** Everything an unauthenticated caller sees, minus what differs per request (date, request id). */
  const seen = (answer: Awaited<ReturnType<typeof f.stack.call>>) => ({
    status: answer.status,
    body: answer.body,
    headers: [...answer.headers.entries()].filter(([name]) => !['date', 'x-request-id', 'content-length', 'etag'].includes(name)).sort(),
  })

  it('refuses a phone identifier up front with channel_unavailable, the same for a known phone and an unknown one, and enqueues nothing', async () => {
    const known = uniquePhone()
    await createVerifiedIdentity(f.db.owner, known)
    const signUp = seen(await f.stack.call('POST', '/sign-ups', { identifier: uniquePhone(), password: 'long enough password' }))
    const knownRecovery = seen(await f.stack.call('POST', '/password-recoveries', { identifier: known }))
    const unknownRecovery = seen(await f.stack.call('POST', '/password-recoveries', { identifier: uniquePhone() }))
    expect(knownRecovery).to.deep.include({ status: 422 })
    expect(knownRecovery.body).to.include({ code: 'channel_unavailable' })
    expect(unknownRecovery).to.deep.equal(knownRecovery)
    expect(signUp.status).to.equal(422)
    expect(signUp.body).to.deep.equal(knownRecovery.body)
    expect(signUp.headers).to.deep.equal(knownRecovery.headers)
    expect(await f.db.owner('outbox.security_outbox_messages')).to.have.length(0)
    expect(await f.db.owner('identity.identities')).to.have.length(1)
    expect(f.logs.text()).not.to.include(known)
  })

  it('offers WhatsApp once a worker with a phone provider registers, and refuses it again once the fleet is email-only for 3 minutes', async () => {
    const phoneWorker = '00000000-0000-4000-8000-00000000beef'
    const now = Date.now()
    await registerChannelsAsWorker(f.db.owner, ['email', 'whatsapp'], new Date(now), phoneWorker)
    await f.stack.web.channels.refresh()
    const accepted = await f.stack.call('POST', '/password-recoveries', { identifier: uniquePhone() })
    expect(accepted.status).to.equal(202)
    // The phone worker is gone; the email-only one heartbeats for more than 3 minutes after its last beat.
    await registerChannelsAsWorker(f.db.owner, ['email'], new Date(now + 3 * 60_000 + 1_000))
    await f.stack.web.channels.refresh()
    const refused = await f.stack.call('POST', '/password-recoveries', { identifier: uniquePhone() })
    expect(refused.status).to.equal(422)
  })
})
