import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

const VERSION = 'v1'
const INFO = Buffer.from('sealpost/security-outbox/v1')
const SALT_BYTES = 16
const IV_BYTES = 12
const TAG_BYTES = 16

/** Opening failed: tampered, truncated, wrong key or wrong context. Deliberately says no more. */
export class EnvelopeError extends Error {
  override name = 'EnvelopeError'
  constructor() {
    super('envelope cannot be opened')
  }
}

/** The additional authenticated data binding an envelope to one message and purpose. */
export function envelopeContext(messageId: string, purpose: string): string {
  return `${messageId}:${purpose}`
}

function deriveKey(masterKey: Buffer, salt: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', masterKey, salt, INFO, 32))
}

/**
 * Seals a secret under AES-256-GCM with a per-envelope HKDF-derived key:
 * `v1.<salt>.<iv>.<ciphertext>.<tag>`, base64url parts, AAD = context.
 */
export function seal(masterKey: Buffer, plaintext: Buffer, context: string): string {
  const salt = randomBytes(SALT_BYTES)
  const iv = randomBytes(IV_BYTES)
  const key = deriveKey(masterKey, salt)
  try {
    const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES })
    cipher.setAAD(Buffer.from(context))
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
    return [VERSION, salt, iv, body, cipher.getAuthTag()]
      .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
      .join('.')
  } finally {
    key.fill(0)
  }
}

/** Opens an envelope sealed by `seal` for the same context; throws EnvelopeError on any mismatch. */
export function open(masterKey: Buffer, envelope: string, context: string): Buffer {
  const parts = envelope.split('.')
  if (parts.length !== 5 || parts[0] !== VERSION) throw new EnvelopeError()
  const [salt, iv, body, tag] = parts.slice(1).map((part) => Buffer.from(part, 'base64url')) as [Buffer, Buffer, Buffer, Buffer]
  if (salt.length !== SALT_BYTES || iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new EnvelopeError()
  const key = deriveKey(masterKey, salt)
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES })
    decipher.setAAD(Buffer.from(context))
    decipher.setAuthTag(tag)
    return Buffer.concat([decipher.update(body), decipher.final()])
  } catch {
    throw new EnvelopeError()
  } finally {
    key.fill(0)
  }
}
