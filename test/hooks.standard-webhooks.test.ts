import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { signingKeyOf, signWebhook, verifyWebhook } from '../src/hooks/standard-webhooks.ts'

describe('Standard Webhooks signatures', () => {
  const key = randomBytes(32)
  const secret = `v1,whsec_${key.toString('base64')}`
  const now = new Date('2026-12-02T12:00:00Z')
  const seconds = String(now.getTime() / 1000)
  const body = Buffer.from('{"user":{},"email_data":{}}')
  const headers = (signature: string, timestamp = seconds, id = 'a3b1c2d4-0000-4000-8000-000000000001') => ({ id, timestamp, signature })

  it('reads the key of a secret in the form Supabase shows, and nothing else', () => {
    expect(signingKeyOf(secret)?.equals(key)).to.equal(true)
    for (const other of [
      key.toString('base64'),
      `whsec_${key.toString('base64')}`,
      'v1,whsec_',
      'v1,whsec_not base64!',
      `v2,whsec_${key.toString('base64')}`,
    ])
      expect(signingKeyOf(other), other).to.equal(null)
  })

  it('accepts a delivery signed over its id, timestamp and raw body, also beside another secret’s signature', () => {
    const signature = signWebhook(key, headers('').id, seconds, body)
    expect(verifyWebhook(key, headers(signature), body, now)).to.deep.equal({ verified: true, webhookId: headers('').id })
    // Supabase signs with each configured secret and joins the entries with ", ".
    const other = signWebhook(randomBytes(32), headers('').id, seconds, body)
    expect(verifyWebhook(key, headers(`${other}, ${signature}`), body, now).verified).to.equal(true)
    expect(verifyWebhook(key, headers(`${signature} ${other}`), body, now).verified).to.equal(true)
  })

  it('refuses another secret’s signature, a changed body, id or timestamp', () => {
    const signature = signWebhook(key, headers('').id, seconds, body)
    const refusal = (verdict: ReturnType<typeof verifyWebhook>) => (verdict.verified ? 'verified' : verdict.refusal)
    expect(refusal(verifyWebhook(randomBytes(32), headers(signature), body, now))).to.equal('invalid_signature')
    expect(refusal(verifyWebhook(key, headers(signature), Buffer.from('{"user":{},"email_data":{} }'), now))).to.equal('invalid_signature')
    expect(refusal(verifyWebhook(key, headers(signature, seconds, 'another-id'), body, now))).to.equal('invalid_signature')
    expect(refusal(verifyWebhook(key, headers(signature, String(Number(seconds) - 1)), body, now))).to.equal('invalid_signature')
    expect(refusal(verifyWebhook(key, headers(signature.replace('v1,', 'v2,')), body, now))).to.equal('invalid_signature')
  })

  it('refuses a timestamp more than five minutes from our clock, either way, however well signed', () => {
    for (const offset of [-301, 301]) {
      const timestamp = String(Number(seconds) + offset)
      const signature = signWebhook(key, headers('').id, timestamp, body)
      expect(verifyWebhook(key, headers(signature, timestamp), body, now)).to.deep.equal({ verified: false, refusal: 'stale_timestamp' })
    }
    const edge = String(Number(seconds) - 300)
    expect(verifyWebhook(key, headers(signWebhook(key, headers('').id, edge, body), edge), body, now).verified).to.equal(true)
  })

  it('refuses a delivery without the three headers, or with an id or timestamp that is not one', () => {
    const signature = signWebhook(key, headers('').id, seconds, body)
    const missing = { verified: false, refusal: 'missing_signature' }
    expect(verifyWebhook(key, { id: undefined, timestamp: seconds, signature }, body, now)).to.deep.equal(missing)
    expect(verifyWebhook(key, { id: headers('').id, timestamp: undefined, signature }, body, now)).to.deep.equal(missing)
    expect(verifyWebhook(key, { id: headers('').id, timestamp: seconds, signature: undefined }, body, now)).to.deep.equal(missing)
    expect(verifyWebhook(key, headers(signature, '1.7e9'), body, now)).to.deep.equal(missing)
    expect(verifyWebhook(key, headers(signature, seconds, 'id with\nnewline'), body, now)).to.deep.equal(missing)
  })
})
