import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import { newWebhookSecret, signWebhook as signEvent } from '../src/crypto/webhook-signature.ts'
import { signingKeyOf, verifyWebhook } from '../src/hooks/standard-webhooks.ts'

// Every signature here is made by the standardwebhooks package, the library supabase/auth signs its hooks with.
describe('Standard Webhooks signatures', () => {
  const key = randomBytes(32)
  const secret = `v1,whsec_${key.toString('base64')}`
  const library = new Webhook(`whsec_${key.toString('base64')}`)
  const now = new Date('2026-12-02T12:00:00Z')
  const seconds = String(now.getTime() / 1000)
  const body = Buffer.from('{"user":{},"email_data":{}}')
  const id = 'a3b1c2d4-0000-4000-8000-000000000001'
  const sign = (at = now, signer = library, text: Buffer = body, messageId = id) => signer.sign(messageId, at, text)
  const headers = (signature: string, timestamp = seconds, webhookId = id) => ({ id: webhookId, timestamp, signature })

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

  it('accepts a delivery the library signed, also beside another secret’s signature in either order and either joiner', () => {
    const signature = sign()
    expect(verifyWebhook(key, headers(signature), body, now)).to.deep.equal({ verified: true, webhookId: id })
    // supabase/auth hookshttp.go signs with each configured secret and joins the entries with ", ".
    const other = sign(now, new Webhook(randomBytes(32), { format: 'raw' }))
    for (const joined of [`${other}, ${signature}`, `${signature}, ${other}`, `${signature} ${other}`])
      expect(verifyWebhook(key, headers(joined), body, now).verified, joined).to.equal(true)
  })

  it('refuses another secret’s signature, a changed body, id or timestamp', () => {
    const signature = sign()
    const refusal = (verdict: ReturnType<typeof verifyWebhook>) => (verdict.verified ? 'verified' : verdict.refusal)
    expect(refusal(verifyWebhook(randomBytes(32), headers(signature), body, now))).to.equal('invalid_signature')
    expect(refusal(verifyWebhook(key, headers(signature), Buffer.from('{"user":{},"email_data":{} }'), now))).to.equal('invalid_signature')
    expect(refusal(verifyWebhook(key, headers(signature, seconds, 'another-id'), body, now))).to.equal('invalid_signature')
    expect(refusal(verifyWebhook(key, headers(signature, String(Number(seconds) - 1)), body, now))).to.equal('invalid_signature')
    expect(refusal(verifyWebhook(key, headers(signature.replace('v1,', 'v2,')), body, now))).to.equal('invalid_signature')
  })

  it('refuses a timestamp more than five minutes from our clock, either way, however well signed', () => {
    for (const offset of [-301, 301]) {
      const at = new Date(now.getTime() + offset * 1000)
      const verdict = verifyWebhook(key, headers(sign(at), String(Number(seconds) + offset)), body, now)
      expect(verdict).to.deep.equal({ verified: false, refusal: 'stale_timestamp' })
    }
    const edge = new Date(now.getTime() - 300_000)
    expect(verifyWebhook(key, headers(sign(edge), String(Number(seconds) - 300)), body, now).verified).to.equal(true)
  })

  it('refuses a delivery without the three headers, or with an id or timestamp that is not one', () => {
    const signature = sign()
    const missing = { verified: false, refusal: 'missing_signature' }
    expect(verifyWebhook(key, { id: undefined, timestamp: seconds, signature }, body, now)).to.deep.equal(missing)
    expect(verifyWebhook(key, { id, timestamp: undefined, signature }, body, now)).to.deep.equal(missing)
    expect(verifyWebhook(key, { id, timestamp: seconds, signature: undefined }, body, now)).to.deep.equal(missing)
    expect(verifyWebhook(key, headers(signature, '1.7e9'), body, now)).to.deep.equal(missing)
    expect(verifyWebhook(key, headers(signature, seconds, 'id with\nnewline'), body, now)).to.deep.equal(missing)
  })

  it('signs events out so that the library’s own verify accepts them, under each secret of a rotation', () => {
    const [current, previous] = [newWebhookSecret(), newWebhookSecret()]
    const text = JSON.stringify({ type: 'message.published', timestamp: new Date().toISOString(), data: { messageId: 'x' } })
    const at = Math.floor(Date.now() / 1000)
    const sent = {
      'webhook-id': 'evt_01',
      'webhook-timestamp': String(at),
      'webhook-signature': signEvent([current, previous], 'evt_01', at, text),
    }
    for (const held of [current, previous]) expect(new Webhook(held).verify(text, sent), held.slice(0, 10)).to.deep.equal(JSON.parse(text))
    expect(() => new Webhook(newWebhookSecret()).verify(text, sent)).to.throw('No matching signature found')
  })
})
