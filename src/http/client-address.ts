import { isIP } from 'node:net'

/**
 * The IPv6 network one client is counted by: a /64, the smallest network a provider gives one
 * subscriber (a mobile device, a home, a server), so no two subscribers share one. A /56 would
 * hold a holder of a /48 to fewer buckets, but lumps together neighbours a carrier numbers from
 * one pool (a /64 per device), and one of them could spend the others' budget.
 */
export const CLIENT_IPV6_PREFIX = 64

/**
 * Who a per-client limit counts, from the address `req.ip` reports, or undefined when that is no
 * IP address (the caller counts the text as it is):
 * - an IPv4 address as it is, in dotted decimal (no other spelling of it is accepted);
 * - an IPv6 address as its /64. A subscriber is given a whole network and may use any address in
 *   it, so counting each address would let one client take a fresh address for every request and
 *   never be limited;
 * - an IPv6 address that carries the client's IPv4 address as that IPv4 address: IPv4-mapped and
 *   -translated (`::ffff:a.b.c.d`, `::ffff:0:a.b.c.d`), NAT64's `64:ff9b::/96`, Teredo (inverted in
 *   the last 32 bits) and 6to4 (`2002:` and the site's IPv4 address). As a /64 every IPv4 client
 *   behind one translator or relay would share one bucket.
 * A router may write the port (`a.b.c.d:port`, `[v6]:port`; Azure's application gateway does):
 * it is dropped, or every new connection would be a client of its own. The result is canonical
 * (lower-case hexadecimal, every group written), so no spelling of an address is a bucket of its own.
 */
export function clientOf(reported: string): string | undefined {
  const address = withoutPort(reported.trim())
  const family = isIP(address)
  if (family === 4) return address
  if (family !== 6) return undefined
  const g = ipv6Groups(address)
  const zero = (from: number, to: number) => g.slice(from, to).every((group) => group === 0)
  if (zero(0, 5) && g[5] === 0xffff) return ipv4(g[6]!, g[7]!)
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return ipv4(g[6]!, g[7]!)
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return ipv4(g[6]!, g[7]!)
  if (g[0] === 0x2001 && g[1] === 0) return ipv4(g[6]! ^ 0xffff, g[7]! ^ 0xffff)
  if (g[0] === 0x2002) return ipv4(g[1]!, g[2]!)
  const groups = CLIENT_IPV6_PREFIX / 16
  return `${[...g.slice(0, groups), ...new Array<number>(8 - groups).fill(0)].map((group) => group.toString(16)).join(':')}/${CLIENT_IPV6_PREFIX}`
}

function withoutPort(address: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(address)
  if (bracketed) return bracketed[1]!
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(address)
  return withPort ? withPort[1]! : address
}

/** The eight 16-bit groups of an address `isIP` calls IPv6: its zone dropped, a dotted IPv4 tail read as two groups. */
function ipv6Groups(address: string): number[] {
  let text = address.split('%', 1)[0]!
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const read = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)))
  const [head = '', tail] = text.split('::')
  const front = read(head)
  if (tail === undefined) return front
  const back = read(tail)
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back]
}

const ipv4 = (high: number, low: number) => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`
