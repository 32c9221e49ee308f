/**
 * Where a sign-in link may point (docs/courier.md "Keys", docs/hooks.md): origins compared the way a
 * browser compares them, after WHATWG URL parsing, so a host is in its ASCII (punycode) form and a
 * default port is dropped. An IDN look-alike (`аpp.example.org` with a Cyrillic `а`) is then another
 * origin than the one it imitates, and nothing but an exact match passes. Pure, for config/schema.ts,
 * the staff routes and the courier core.
 */

/** The origin of an https link as a browser opens it, or undefined for anything else. */
export function linkOrigin(link: string): string | undefined {
  try {
    const url = new URL(link)
    return url.protocol === 'https:' && url.hostname !== '' ? url.origin : undefined
  } catch {
    return undefined
  }
}

/** An allowed origin as staff or a setting write it: `https://host[:port]` and nothing more (no path, query or credentials), normalized. */
export function parseLinkOrigin(text: string): string | undefined {
  try {
    const url = new URL(text.trim())
    const bare = url.pathname === '/' && url.search === '' && url.hash === '' && url.username === '' && url.password === ''
    return url.protocol === 'https:' && url.hostname !== '' && bare ? url.origin : undefined
  } catch {
    return undefined
  }
}

/** Whether a link points at one of the allowed origins, exactly. */
export function linkOriginAllowed(link: string, allowed: readonly string[]): boolean {
  const origin = linkOrigin(link)
  return origin !== undefined && allowed.includes(origin)
}

/** A comma-separated list of origins (SUPABASE_LINK_ORIGINS, KRATOS_LINK_ORIGINS), normalized; throws on an entry that is not one. */
export function parseLinkOrigins(text: string): string[] {
  if (text.trim() === '') return []
  return text.split(',').map((entry) => {
    const origin = parseLinkOrigin(entry)
    if (!origin) throw new Error('expected a comma-separated list of https origins like https://auth.example.org (no path)')
    return origin
  })
}
