import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { EnvelopeError, envelopeContext, open, seal } from '../src/crypto/envelope.ts'
import { generateCode, hashCode, verifyCode } from '../src/crypto/codes.ts'

describe('envelope seal/open', () => {
  const key = randomBytes(32)
  const context = envelopeContext('01a22d1f-4e0c-7711-8dbc-3725e1d0239f', 'password_recovery')
  const sealed = () => seal(key, Buffer.from('123456'), context)

  /** Flips one bit in the base64url part `index` of a v1 envelope. */
  function tamper(envelope: string, index: number): string {
    const parts = envelope.split('.')
    const bytes = Buffer.from(parts[index]!, 'base64url')
    bytes[0] = bytes[0]! ^ 0x01
    parts[index] = bytes.toString('base64url')
    return parts.join('.')
  }

  it('opens what it sealed, under the same key and context', () => {
    expect(open(key, sealed(), context).toString()).to.equal('123456')
  })

  it('writes a versioned envelope that differs every time and never contains the plaintext', () => {
    const [a, b] = [sealed(), sealed()]
    expect(a).to.match(/^v1\.[\w-]+\.[\w-]+\.[\w-]+\.[\w-]+$/)
    expect(a).not.to.equal(b)
    expect(a).not.to.include('123456')
  })

  const refusals: [string, () => string, Buffer?, string?][] = [
    ['a flipped salt bit', () => tamper(sealed(), 1)],
    ['a flipped iv bit', () => tamper(sealed(), 2)],
    ['a flipped ciphertext bit', () => tamper(sealed(), 3)],
    ['a flipped tag bit', () => tamper(sealed(), 4)],
    ['a wrong AAD (another message id)', sealed, undefined, envelopeContext('01a22d1f-4e0c-7711-8dbc-3725e1d02400', 'password_recovery')],
    ['a wrong AAD (another purpose)', sealed, undefined, envelopeContext('01a22d1f-4e0c-7711-8dbc-3725e1d0239f', 'step_up')],
    ['a wrong key', sealed, randomBytes(32)],
    ['an unknown version', () => sealed().replace(/^v1/, 'v2')],
    ['a truncated envelope', () => sealed().split('.').slice(0, 4).join('.')],
    ['garbage', () => 'not an envelope'],
  ]
  for (const [what, envelope, otherKey, otherContext] of refusals) {
    it(`refuses ${what}`, () => {
      expect(() => open(otherKey ?? key, envelope(), otherContext ?? context)).to.throw(EnvelopeError, 'envelope cannot be opened')
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
})
