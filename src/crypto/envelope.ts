import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'
import type { KeyRing } from './key-ring.ts'
import { SealpostError } from '../errors/sealpost-error.ts'

/**
 * The envelope versions this release opens, oldest first; it seals the newest every live reader
 * opens (src/outbox/envelope-negotiation.ts, docs/upgrading.md "Format negotiation").
 */
export const READABLE_ENVELOPE_VERSIONS = Object.freeze(['v1', 'v2'] as const)
export type EnvelopeVersion = (typeof READABLE_ENVELOPE_VERSIONS)[number]
const NEWEST: EnvelopeVersion = 'v2'
const INFO = { v1: Buffer.from('sealpost/security-outbox/v1'), v2: Buffer.from('sealpost/security-outbox/v2') }
const SALT_BYTES = 16
const IV_BYTES = 12
const TAG_BYTES = 16

/** Opening failed: tampered, truncated, wrong or retired key, or wrong context. Deliberately says no more. */
export class EnvelopeError extends SealpostError {
  override name = 'EnvelopeError'
  constructor() {
    super('envelope cannot be opened')
  }
}

/** What an envelope is bound to: one message, its purpose, and where it may be sent. */
export type EnvelopeContext = Readonly<{ messageId: string; purpose: string; channel: string; destination: string }>

/**
 * The context of a message's envelope. Sealed into the AAD, so a row whose destination or channel
 * was edited in the database no longer opens (decryption_failed) instead of sending the secret
 * elsewhere.
 */
export function envelopeContext(messageId: string, purpose: string, channel: string, destination: string): EnvelopeContext {
  return Object.freeze({ messageId, purpose, channel, destination })
}

/**
 * v2 binds all four fields; v1 (before key rings) bound only message and purpose. The destination
 * is last and the other three hold no colon, so the text is unambiguous.
 */
function additionalData(version: EnvelopeVersion, context: EnvelopeContext): Buffer {
  const { messageId, purpose, channel, destination } = context
  return Buffer.from(version === 'v2' ? `${messageId}:${purpose}:${channel}:${destination}` : `${messageId}:${purpose}`)
}

function deriveKey(masterKey: Buffer, salt: Buffer, version: EnvelopeVersion): Buffer {
  return Buffer.from(hkdfSync('sha256', masterKey, salt, INFO[version], 32))
}

/**
 * Seals a secret under the ring's first key with AES-256-GCM and a per-envelope HKDF-derived key:
 * `v2.<keyId>.<salt>.<iv>.<ciphertext>.<tag>`, base64url parts, AAD = the whole context. `v1` is
 * what release 0.1.0 wrote and is all its worker opens: `v1.<salt>.<iv>.<ciphertext>.<tag>`, no
 * key id, AAD = message id and purpose only (docs/security.md "Envelopes during a rolling upgrade").
 */
export function seal(ring: KeyRing, plaintext: Buffer, context: EnvelopeContext, version: EnvelopeVersion = NEWEST): string {
  const [{ id, key: masterKey }] = ring
  const salt = randomBytes(SALT_BYTES)
  const iv = randomBytes(IV_BYTES)
  const key = deriveKey(masterKey, salt, version)
  try {
    const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES })
    cipher.setAAD(additionalData(version, context))
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
    const parts = [salt, iv, body, cipher.getAuthTag()].map((part) => part.toString('base64url'))
    return (version === 'v2' ? [version, id, ...parts] : [version, ...parts]).join('.')
  } finally {
    key.fill(0)
  }
}

function openWith(masterKey: Buffer, version: EnvelopeVersion, parts: string[], context: EnvelopeContext): Buffer {
  const [salt, iv, body, tag] = parts.map((part) => Buffer.from(part, 'base64url')) as [Buffer, Buffer, Buffer, Buffer]
  if (salt.length !== SALT_BYTES || iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new EnvelopeError()
  const key = deriveKey(masterKey, salt, version)
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES })
    decipher.setAAD(additionalData(version, context))
    decipher.setAuthTag(tag)
    return Buffer.concat([decipher.update(body), decipher.final()])
  } catch {
    throw new EnvelopeError()
  } finally {
    key.fill(0)
  }
}

/**
 * Opens an envelope for the same context under the key its id names; throws EnvelopeError on any
 * mismatch, including a key id no longer in the ring. A v1 envelope names no key: during the
 * transition it is tried under every key of the ring (GCM refuses all but the right one).
 */
export function open(ring: KeyRing, envelope: string, context: EnvelopeContext): Buffer {
  const parts = envelope.split('.')
  if (parts[0] === 'v2' && parts.length === 6) {
    const entry = ring.find((candidate) => candidate.id === parts[1])
    if (!entry) throw new EnvelopeError()
    return openWith(entry.key, 'v2', parts.slice(2), context)
  }
  if (parts[0] === 'v1' && parts.length === 5) {
    for (const { key } of ring) {
      try {
        return openWith(key, 'v1', parts.slice(1), context)
      } catch {
        // The next key, or EnvelopeError below.
      }
    }
  }
  throw new EnvelopeError()
}

/**
 * The version an envelope names when it is one this release does not know (`v3.…` from a newer
 * release), else undefined: such a message waits for a reader that knows it instead of being
 * dead-lettered. Anything not shaped `v<digits>.` is not a version at all and fails to open.
 */
export function unknownEnvelopeVersion(envelope: string): string | undefined {
  const version = /^(v\d{1,3})\./.exec(envelope)?.[1]
  return version !== undefined && !(READABLE_ENVELOPE_VERSIONS as readonly string[]).includes(version) ? version : undefined
}
