import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { EnvelopeError, envelopeContext, open, seal, unknownEnvelopeVersion, type EnvelopeContext } from '../src/crypto/envelope.ts'
import { generateCode, hashCode, verifyCode } from '../src/crypto/codes.ts'
import { parseKeyRing, singleKeyRing, type KeyRing } from '../src/crypto/key-ring.ts'
import { ENVELOPE_VERSIONS } from '../src/outbox/constants.ts'

/** A v1 envelope exactly as the code before key rings wrote it (AAD `<messageId>:<purpose>`). */
function sealV1(masterKey: Buffer, plaintext: Buffer, context: EnvelopeContext): string {
  const salt = randomBytes(16)
  const iv = randomBytes(12)
  const key = Buffer.from(hkdfSync('sha256', masterKey, salt, Buffer.from('sealpost/security-outbox/v1'), 32))
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: 16 })
  cipher.setAAD(Buffer.from(`${context.messageId}:${context.purpose}`))
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return ['v1', ...[salt, iv, body, cipher.getAuthTag()].map((part) => part.toString('base64url'))].join('.')
}

/** Release 0.1.0's reader exactly (8551a84 src/crypto/envelope.ts `open`): v1 only, AAD `<messageId>:<purpose>`. */
function openAsRelease010(masterKey: Buffer, envelope: string, messageId: string, purpose: string): Buffer {
  const parts = envelope.split('.')
  if (parts.length !== 5 || parts[0] !== 'v1') throw new Error('0.1.0 cannot open this')
  const [salt, iv, body, tag] = parts.slice(1).map((part) => Buffer.from(part, 'base64url')) as [Buffer, Buffer, Buffer, Buffer]
  const key = Buffer.from(hkdfSync('sha256', masterKey, salt, Buffer.from('sealpost/security-outbox/v1'), 32))
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: 16 })
  decipher.setAAD(Buffer.from(`${messageId}:${purpose}`))
  decipher.setAuthTag(tag)
  return Buffer.concat([decipher.update(body), decipher.final()])
}

describe('envelope seal/open', () => {
  const key = randomBytes(32)
  const ring: KeyRing = [{ id: 'k1', key }]
  const messageId = '01a22d1f-4e0c-7711-8dbc-3725e1d0239f'
  const context = envelopeContext(messageId, 'password_recovery', 'email', 'alice@example.com')
  const sealed = () => seal(ring, Buffer.from('123456'), context)

  /** Flips one bit in the base64url part `index` of an envelope. */
  function tamper(envelope: string, index: number): string {
    const parts = envelope.split('.')
    const bytes = Buffer.from(parts[index]!, 'base64url')
    bytes[0] = bytes[0]! ^ 0x01
    parts[index] = bytes.toString('base64url')
    return parts.join('.')
  }

  it('opens what it sealed, under the same key and context', () => {
    expect(open(ring, sealed(), context).toString()).to.equal('123456')
  })

  it('writes a v2 envelope naming its key id, different every time, never containing the plaintext', () => {
    const [a, b] = [sealed(), sealed()]
    expect(a).to.match(/^v2\.k1\.[\w-]+\.[\w-]+\.[\w-]+\.[\w-]+$/)
    expect(a).not.to.equal(b)
    expect(a).not.to.include('123456')
    expect(ENVELOPE_VERSIONS, 'the version the ciphertext CHECK accepts').to.include(a.split('.')[0])
  })

  it('seals v1 on request exactly as 0.1.0 did: no key id, bound to message and purpose, opened by 0.1.0’s reader', () => {
    const v1 = seal(ring, Buffer.from('123456'), context, 'v1')
    expect(v1).to.match(/^v1\.[\w-]+\.[\w-]+\.[\w-]+\.[\w-]+$/)
    expect(openAsRelease010(key, v1, messageId, 'password_recovery').toString()).to.equal('123456')
    expect(open(ring, v1, context).toString()).to.equal('123456')
    expect(() => openAsRelease010(key, v1, messageId, 'step_up')).to.throw()
    expect(() => openAsRelease010(key, sealed(), messageId, 'password_recovery'), 'v2 is unreadable to 0.1.0').to.throw()
  })

  it('names an envelope version it does not open, and only a well-formed one', () => {
    expect(unknownEnvelopeVersion('v3.k1.a.b.c.d')).to.equal('v3')
    expect(unknownEnvelopeVersion(sealed())).to.equal(undefined)
    expect(unknownEnvelopeVersion(seal(ring, Buffer.from('1'), context, 'v1'))).to.equal(undefined)
    for (const garbage of ['', 'v3', 'x3.a.b', 'V3.a.b', 'v.a.b', 'v1234.a.b'])
      expect(unknownEnvelopeVersion(garbage), garbage).to.equal(undefined)
  })

  const refusals: [string, () => string, KeyRing?, EnvelopeContext?][] = [
    ['a flipped salt bit', () => tamper(sealed(), 2)],
    ['a flipped iv bit', () => tamper(sealed(), 3)],
    ['a flipped ciphertext bit', () => tamper(sealed(), 4)],
    ['a flipped tag bit', () => tamper(sealed(), 5)],
    [
      'a wrong AAD (another message id)',
      sealed,
      undefined,
      envelopeContext('01a22d1f-4e0c-7711-8dbc-3725e1d02400', 'password_recovery', 'email', 'alice@example.com'),
    ],
    ['a wrong AAD (another purpose)', sealed, undefined, envelopeContext(messageId, 'step_up', 'email', 'alice@example.com')],
    [
      'a wrong AAD (another destination)',
      sealed,
      undefined,
      envelopeContext(messageId, 'password_recovery', 'email', 'mallory@example.com'),
    ],
    ['a wrong AAD (another channel)', sealed, undefined, envelopeContext(messageId, 'password_recovery', 'whatsapp', 'alice@example.com')],
    ['a wrong key under the same id', sealed, [{ id: 'k1', key: randomBytes(32) }]],
    ['a key id no longer in the ring', sealed, [{ id: 'k2', key: randomBytes(32) }]],
    [
      'a key id rewritten to another key of the ring',
      () => sealed().replace(/^v2\.k1\./, 'v2.k2.'),
      [
        { id: 'k1', key },
        { id: 'k2', key: randomBytes(32) },
      ],
    ],
    ['an unknown version', () => sealed().replace(/^v2/, 'v3')],
    ['a truncated envelope', () => sealed().split('.').slice(0, 5).join('.')],
    ['garbage', () => 'not an envelope'],
  ]
  for (const [what, envelope, otherRing, otherContext] of refusals) {
    it(`refuses ${what}`, () => {
      expect(() => open(otherRing ?? ring, envelope(), otherContext ?? context)).to.throw(EnvelopeError, 'envelope cannot be opened')
    })
  }

  it('seals under the first key of a ring and opens under any key still listed', () => {
    const [older, newer] = [
      { id: 'old', key: randomBytes(32) },
      { id: 'new', key: randomBytes(32) },
    ]
    const underOld = seal([older, newer], Buffer.from('111111'), context)
    const underNew = seal([newer, older], Buffer.from('222222'), context)
    expect(underOld.split('.')[1]).to.equal('old')
    expect(underNew.split('.')[1]).to.equal('new')
    for (const both of [
      [older, newer],
      [newer, older],
    ] as KeyRing[]) {
      expect(open(both, underOld, context).toString()).to.equal('111111')
      expect(open(both, underNew, context).toString()).to.equal('222222')
    }
    expect(() => open([newer], underOld, context), 'the old key dropped').to.throw(EnvelopeError)
  })

  it('still opens a v1 envelope (sealed before key rings) under any key of the ring, for its old context', () => {
    const legacy = sealV1(key, Buffer.from('333333'), context)
    expect(
      open(
        [
          { id: 'new', key: randomBytes(32) },
          { id: '0', key },
        ],
        legacy,
        context,
      ).toString(),
    ).to.equal('333333')
    expect(() => open([{ id: 'new', key: randomBytes(32) }], legacy, context)).to.throw(EnvelopeError)
    expect(() => open(ring, legacy, envelopeContext(messageId, 'step_up', 'email', 'alice@example.com'))).to.throw(EnvelopeError)
  })
})

describe('key rings', () => {
  const a = randomBytes(32).toString('base64')
  const b = randomBytes(32).toString('base64')

  it('parse `id:base64key,…` in order, the first key first', () => {
    const ring = parseKeyRing(`2026-12:${a}, 2026-06:${b}`, { min: 32, max: 32 })
    expect(ring.map((entry) => entry.id)).to.deep.equal(['2026-12', '2026-06'])
    expect(ring[0].key.toString('base64')).to.equal(a)
    expect(singleKeyRing(Buffer.from(a, 'base64'))[0].id).to.equal('0')
  })

  for (const [what, text] of [
    ['a key without an id', a],
    ['an id with a dot', `k.1:${a}`],
    ['a short key', `k1:${randomBytes(16).toString('base64')}`],
    ['a repeated id', `k1:${a},k1:${b}`],
    ['an empty entry', `k1:${a},`],
  ] as const) {
    it(`refuse ${what}, without repeating the value`, () => {
      expect(() => parseKeyRing(text, { min: 32, max: 32 }))
        .to.throw(Error)
        .that.satisfies((error: Error) => !error.message.includes(a.slice(0, 12)) && !error.message.includes(b.slice(0, 12)))
    })
  }
})

describe('one-time codes', () => {
  const key = randomBytes(32)

  it('are six decimal digits, zero-padded', () => {
    expect(generateCode(() => 42).toString()).to.equal('000042')
    expect(generateCode().toString()).to.match(/^\d{6}$/)
  })

  it('verify only against the hash of their own challenge', () => {
    const hash = hashCode(key, 'challenge-a', '123456')
    expect(verifyCode(key, 'challenge-a', '123456', hash)).to.equal(true)
    expect(verifyCode(key, 'challenge-a', '123457', hash)).to.equal(false)
    expect(verifyCode(key, 'challenge-b', '123456', hash)).to.equal(false)
    expect(verifyCode(randomBytes(32), 'challenge-a', '123456', hash)).to.equal(false)
  })

  it('verify under any key of the CODE_HASH_KEYS ring, in either order', () => {
    const newer = randomBytes(32)
    const hash = hashCode(key, 'challenge-a', '123456')
    expect(verifyCode([newer, key], 'challenge-a', '123456', hash)).to.equal(true)
    expect(verifyCode([key, newer], 'challenge-a', '123456', hash)).to.equal(true)
    expect(verifyCode([newer], 'challenge-a', '123456', hash)).to.equal(false)
    expect(verifyCode([newer, key], 'challenge-a', '123457', hash)).to.equal(false)
  })
})
