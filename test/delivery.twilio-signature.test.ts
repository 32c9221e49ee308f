import { expect } from 'chai'
import fc from 'fast-check'
import twilio from 'twilio'
import { twilioSignature, twilioSignatureValid } from '../src/providers/twilio/signature.ts'

// Twilio's own validator (the `twilio` package, src/webhooks/webhooks.ts): ours must accept exactly what it accepts.
const TOKEN = 'twilio-auth-token-for-signature-tests'
type Pairs = [string, string][]
/** The form as Twilio's Express helpers hand it to validateRequest: one key per name, repeated names as arrays. */
const asObject = (pairs: Pairs) =>
  pairs.reduce<Record<string, string | string[]>>((object, [name, value]) => {
    const held = object[name]
    object[name] = held === undefined ? value : [...(Array.isArray(held) ? held : [held]), value]
    return object
  }, {})
const signedBy = (url: string, pairs: Pairs) => twilio.getExpectedTwilioSignature(TOKEN, url, asObject(pairs))
const agree = (configured: string, signedOver: string, pairs: Pairs) => {
  const signature = signedBy(signedOver, pairs)
  const theirs = twilio.validateRequest(TOKEN, signature, configured, asObject(pairs))
  const ours = twilioSignatureValid(TOKEN, configured, pairs, signature)
  return { theirs, ours }
}

const STATUS: Pairs = [
  ['AccountSid', `AC${'5'.repeat(32)}`],
  ['MessageSid', `SM${'a'.repeat(32)}`],
  ['MessageStatus', 'undelivered'],
  ['ErrorCode', '30005'],
  ['To', '+15555550100'],
]

describe('Twilio request signatures, as twilio-node validates them', () => {
  it('signs a status callback exactly as twilio-node does', () => {
    expect(twilioSignature(TOKEN, 'https://sealpost.example/webhooks/twilio', STATUS)).to.equal(
      signedBy('https://sealpost.example/webhooks/twilio', STATUS),
    )
  })

  it('accepts a signature over the URL with the default port, without it, and with the legacy query string, as Twilio’s validator does (item 9)', () => {
    const configured = 'https://sealpost.example/webhooks/twilio'
    for (const signedOver of ['https://sealpost.example:443/webhooks/twilio', 'https://sealpost.example/webhooks/twilio']) {
      expect(agree(configured, signedOver, STATUS), signedOver).to.deep.equal({ theirs: true, ours: true })
      expect(agree('https://sealpost.example:443/webhooks/twilio', signedOver, STATUS), `:443 configured, ${signedOver}`).to.deep.equal({
        theirs: true,
        ours: true,
      })
    }
    // A query value Twilio signed escaped the way Node's legacy querystring escapes it.
    const withQuery = "https://sealpost.example/webhooks/twilio?tenant=o'brien&x=a b"
    expect(agree(withQuery, 'https://sealpost.example/webhooks/twilio?tenant=o%27brien&x=a%20b', STATUS)).to.deep.equal({
      theirs: true,
      ours: true,
    })
  })

  it('refuses what Twilio’s validator refuses: another host, path, port or scheme, or a changed parameter', () => {
    const configured = 'https://sealpost.example/webhooks/twilio'
    for (const signedOver of [
      'https://attacker.example/webhooks/twilio',
      'https://sealpost.example/webhooks/twilio/',
      'https://sealpost.example:8443/webhooks/twilio',
      'http://sealpost.example/webhooks/twilio',
      'http://sealpost.example:80/webhooks/twilio',
    ])
      expect(agree(configured, signedOver, STATUS), signedOver).to.deep.equal({ theirs: false, ours: false })
    const signature = signedBy(configured, STATUS)
    const changed: Pairs = STATUS.map(([name, value]) => [name, name === 'ErrorCode' ? '30007' : value])
    expect(twilioSignatureValid(TOKEN, configured, changed, signature)).to.equal(false)
    expect(twilioSignatureValid(TOKEN, configured, STATUS, undefined)).to.equal(false)
  })

  it('agrees with twilio-node on any URL variant and any form, repeated names included', () => {
    const host = fc.constantFrom('sealpost.example', 'hooks.sealpost.example')
    const port = fc.constantFrom('', ':443', ':80', ':8443')
    const scheme = fc.constantFrom('https', 'http')
    const query = fc.constantFrom('', '?a=1', "?tenant=o'brien", '?x=a%20b&y=~', '?q=%27')
    const url = fc.tuple(scheme, host, port, query).map(([s, h, p, q]) => `${s}://${h}${p}/webhooks/twilio${q}`)
    const pairs = fc.array(
      fc.tuple(fc.constantFrom('To', 'From', 'Body', 'MessageSid', 'x'), fc.string({ maxLength: 8, unit: 'binary' })),
      {
        maxLength: 6,
      },
    )
    let accepted = 0
    fc.assert(
      // Half the runs sign over the configured URL itself, the rest over any variant of any URL.
      fc.property(url, url, fc.boolean(), pairs, (configured, other, same, form) => {
        const { theirs, ours } = agree(configured, same ? configured : other, form)
        if (theirs) accepted += 1
        return theirs === ours
      }),
      { numRuns: 500 },
    )
    expect(accepted, 'runs where the signature was valid').to.be.above(100)
  })
})
