import { expect } from 'chai'
import { createWebhookPost } from '../src/delivery/webhook-sender.ts'
import { guardedLookup, isForbiddenAddress, type Resolve } from '../src/platform/webhook-address-guard.ts'

/**
 * An endpoint host whose DNS answers an IPv6 address that a translator on the worker's network
 * turns into a private IPv4 one: the guard must refuse it at connect time as it refuses the
 * IPv4 address itself (docs/events.md "Endpoint URLs").
 */
const TRANSLATED_METADATA = [
  // RFC 8215's local-use NAT64 prefix (64:ff9b:1::/48): a site's own NAT64 maps it to 169.254.169.254.
  '64:ff9b:1::a9fe:a9fe',
  '64:ff9b:1:ffff::a00:1',
  // RFC 2765/6052 IPv4-translated form (::ffff:0:0:0/96), which SIIT translators carry to 169.254.169.254.
  '::ffff:0:a9fe:a9fe',
  '::ffff:0:7f00:1',
]

describe('attack: an endpoint host that resolves to a translated private address (review2)', () => {
  it('finds every translated form of a private IPv4 address forbidden', () => {
    for (const address of TRANSLATED_METADATA) expect(isForbiddenAddress(address), address).to.equal(true)
  })

  it('posts nothing to a host whose DNS answers one of them: the delivery is refused, not retried as a network blip', async () => {
    const resolve: Resolve = async () => [{ address: '64:ff9b:1::a9fe:a9fe', family: 6 }]
    const post = createWebhookPost({ lookup: guardedLookup({ allowedHosts: [], resolve }), timeoutMs: 2_000 })
    try {
      const answer = await post({ url: new URL('https://metadata.attacker.example/hook'), headers: {}, body: '{}' })
      expect(answer).to.deep.equal({ kind: 'unsent', failure: 'address_refused' })
    } finally {
      post.close()
    }
  })

  it('keeps the well-known NAT64 prefix refused whole and public IPv6 addresses open', () => {
    expect(isForbiddenAddress('64:ff9b::5db8:d822')).to.equal(true)
    expect(isForbiddenAddress('2606:4700::1111')).to.equal(false)
    expect(isForbiddenAddress('2001:4860:4860::8888')).to.equal(false)
  })
})
