import { expect } from 'chai'
import { uniqueEmail } from './support/helpers.ts'
import { useIdentityKit } from './support/identity-kit.ts'

/**
 * Adversarial review of the owner-first budgets and device cookies: attacks on what was built for them, each performed through the
 * real routes from the attacker's own client addresses (X-Forwarded-For, TRUST_PROXY 1).
 */
describe('attacks on the trusted devices', () => {
  const { call, code } = useIdentityKit({ trustProxy: 1 })
  const from = (address: string, extra: Record<string, string> = {}) => ({ 'x-forwarded-for': address, ...extra })
  const owner = from('203.0.113.9')
  const password = 'the owner chose this passphrase'
  const newPassword = 'a brand new passphrase of hers'
  const deviceCookie = (headers: Headers) =>
    headers
      .getSetCookie()
      .map((cookie) => cookie.split(';')[0]!)
      .find((cookie) => cookie.startsWith('sealpost_device='))

  it('a thief who signed in once with a stolen password keeps a device that outlives the owner’s recovery and guesses past the account’s ceiling', async () => {
    const alice = uniqueEmail('alice')
    expect((await call('POST', '/sign-ups', { identifier: alice, password }, owner)).status).to.equal(202)
    expect((await call('POST', '/sign-ups/confirmation', { identifier: alice, code: await code(alice), password }, owner)).status).to.equal(
      201,
    )
    // The thief signs in once with the stolen password: the answer trusts the thief's client.
    const stolen = await call('POST', '/sessions', { identifier: alice, password }, from('198.51.100.66'))
    expect(stolen.status).to.equal(201)
    const thiefDevice = from('198.51.100.66', { cookie: deviceCookie(stolen.headers)! })
    // The owner notices and recovers: a new password, every session revoked.
    expect((await call('POST', '/password-recoveries', { identifier: alice }, owner)).status).to.equal(202)
    expect(
      (await call('POST', '/password-recoveries/completion', { identifier: alice, code: await code(alice), newPassword }, owner)).status,
    ).to.equal(204)
    expect((await call('GET', '/sessions', undefined, { authorization: `Bearer ${String(stolen.body!.token)}` })).status).to.equal(401)
    // Strangers on two networks spend the sign-in ceiling: no anonymous client may guess any more.
    for (const n of [1, 2])
      for (let guess = 0; guess < 5; guess++)
        expect(
          (await call('POST', '/sessions', { identifier: alice, password: `guess ${n}.${guess}` }, from(`198.51.100.${n}`))).status,
        ).to.equal(401)
    expect(
      (await call('POST', '/sessions', { identifier: alice, password: newPassword }, from('192.0.2.200'))).status,
      'the ceiling',
    ).to.equal(401)
    // The thief's old device still spends a budget of its own: ten more guesses, the tenth right.
    for (let guess = 0; guess < 9; guess++)
      await call('POST', '/sessions', { identifier: alice, password: `thief guess ${guess}` }, thiefDevice)
    expect(
      (await call('POST', '/sessions', { identifier: alice, password: newPassword }, thiefDevice)).status,
      'a device trusted under the old password guesses the new one past the ceiling',
    ).to.equal(401)
  })
  it('one busy client evicts the owner’s other devices: twenty sign-ins on the laptop and the phone is a stranger again when strangers spend the ceiling', async () => {
    const alice = uniqueEmail('alice')
    expect((await call('POST', '/sign-ups', { identifier: alice, password }, owner)).status).to.equal(202)
    expect((await call('POST', '/sign-ups/confirmation', { identifier: alice, code: await code(alice), password }, owner)).status).to.equal(
      201,
    )
    const onPhone = await call('POST', '/sessions', { identifier: alice, password }, from('203.0.113.50'))
    expect(onPhone.status).to.equal(201)
    const phone = from('203.0.113.50', { cookie: deviceCookie(onPhone.headers)! })
    // The laptop signs in again and again (a 30-minute idle timeout makes that a normal week), sending its cookie each time.
    let laptopCookie = ''
    for (let signIn = 0; signIn < 20; signIn++) {
      const signedIn = await call(
        'POST',
        '/sessions',
        { identifier: alice, password },
        from('203.0.113.51', laptopCookie ? { cookie: laptopCookie } : {}),
      )
      expect(signedIn.status).to.equal(201)
      laptopCookie = deviceCookie(signedIn.headers) ?? laptopCookie
    }
    for (const n of [1, 2])
      for (let guess = 0; guess < 5; guess++)
        expect(
          (await call('POST', '/sessions', { identifier: alice, password: `guess ${n}.${guess}` }, from(`198.51.100.${n}`))).status,
        ).to.equal(401)
    expect((await call('POST', '/sessions', { identifier: alice, password }, phone)).status, 'the owner’s phone, trusted 90 days').to.equal(
      201,
    )
  })
})
