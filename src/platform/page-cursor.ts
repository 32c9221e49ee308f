import { DomainError } from '../identity/errors.ts'

/** A keyset position in a staff page: the row's time and id, the order every page sorts by. */
export type PageCursor = { at: Date; id: string }

/** The opaque cursor a page answers with (`startCursor`, `endCursor`). */
export const encodePageCursor = (at: Date, id: string): string => Buffer.from(`${at.toISOString()}|${id}`).toString('base64url')

/** A cursor this API gave out, or `invalid_cursor` (422) for anything else. */
export function decodePageCursor(text: string): PageCursor {
  const [at, id] = Buffer.from(text, 'base64url').toString('utf8').split('|')
  const date = new Date(at ?? '')
  if (!id || Number.isNaN(date.getTime()) || !/^[0-9a-f-]{36}$/.test(id))
    throw new DomainError('invalid_cursor', 'The cursor is not one this API gave out.')
  return { at: date, id }
}
