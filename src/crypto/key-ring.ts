/** One named key of a ring: the id travels in envelopes, the key never leaves the process. */
export type RingKey = Readonly<{ id: string; key: Buffer }>

/**
 * A key ring (docs/architecture.md §8, decision 11): the first key seals or hashes, every key opens or verifies, so a new key
 * can be deployed before it is used and an old one kept until nothing sealed under it is alive.
 */
export type KeyRing = readonly [RingKey, ...RingKey[]]

/** The id a single-key setting (OUTBOX_ENCRYPTION_KEY, CODE_HASH_KEY) gets as a one-entry ring. */
export const SINGLE_KEY_ID = '0'

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/

/**
 * Parses `id:base64key,id:base64key…`. Pure, so the config schema and tests share it; the thrown
 * message describes the format and never repeats any part of the value.
 */
export function parseKeyRing(text: string, bytes: { min: number; max: number }): KeyRing {
  const entries = text.split(',').map((entry) => entry.trim())
  const ring: RingKey[] = []
  for (const entry of entries) {
    const separator = entry.indexOf(':')
    const id = entry.slice(0, separator)
    const encoded = entry.slice(separator + 1)
    if (separator < 1 || !KEY_ID.test(id))
      throw new Error('must be a comma-separated list of id:base64key (ids: letters, digits, - and _, at most 32)')
    const key = Buffer.from(encoded, 'base64')
    if (key.length < bytes.min || key.length > bytes.max || key.toString('base64') !== encoded) {
      throw new Error(
        bytes.min === bytes.max
          ? `every key must be ${bytes.min} random bytes, base64-encoded`
          : `every key must be ${bytes.min}–${bytes.max} random bytes, base64-encoded`,
      )
    }
    if (ring.some((other) => other.id === id)) throw new Error('lists a key id twice')
    ring.push({ id, key })
  }
  return ring as unknown as KeyRing
}

/** A one-entry ring for a single key. */
export function singleKeyRing(key: Buffer): KeyRing {
  return [{ id: SINGLE_KEY_ID, key }]
}

/** The keys of a ring alone, current first (code-hash verification needs no ids). */
export function ringKeys(ring: KeyRing): readonly Buffer[] {
  return ring.map((entry) => entry.key)
}
