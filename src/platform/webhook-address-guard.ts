import { lookup as dnsLookup } from 'node:dns/promises'
import { BlockList, isIP, type LookupFunction } from 'node:net'
import { DomainError } from '../identity/errors.ts'

/** An endpoint URL Sealpost will not post to (docs/events.md "Endpoint URLs"); `code` says why, never the address. */
export class WebhookUrlRefusedError extends DomainError {
  override name = 'WebhookUrlRefusedError'
}

/** Resolves a host name to every address it has: the seam production (DNS) and tests (a fixed table) share. */
export type Resolve = (host: string) => Promise<{ address: string; family: number }[]>

export const resolveWithDns: Resolve = async (host) => await dnsLookup(host, { all: true, verbatim: true })

export type AddressPolicy = {
  /** NODE_ENV is production: https only. */
  production: boolean
  /** WEBHOOK_ALLOWED_HOSTS, lower-case: these hosts skip the address check (an internal receiver, a test). */
  allowedHosts: readonly string[]
  resolve: Resolve
}

// Loopback, "this network", private, CGNAT, link-local, benchmark, multicast and reserved ranges,
// and the IPv6 forms that carry an IPv4 address (mapped addresses are matched by BlockList itself;
// the NAT64 prefixes, well-known and local-use, and the IPv4-translated form are refused whole, since
// a translator on the worker's network would carry them to any IPv4 address, 169.254.169.254 included).
const FORBIDDEN = new BlockList()
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  FORBIDDEN.addSubnet(network, prefix, 'ipv4')
for (const [network, prefix] of [
  ['::', 96],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['::ffff:0:0:0', 96],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const)
  FORBIDDEN.addSubnet(network, prefix, 'ipv6')

/** True for an address no endpoint may reach unless its host is allow-listed. */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address)
  if (family === 0) return true
  return FORBIDDEN.check(address, family === 4 ? 'ipv4' : 'ipv6')
}

function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '').toLowerCase()
}

/**
 * The URL's own rules, before any lookup: https (http only outside production and only to an
 * allow-listed host), no credentials, and no literal IP unless allow-listed. Returns the host and
 * whether it is allow-listed.
 */
export function checkWebhookUrlShape(text: string, policy: Pick<AddressPolicy, 'production' | 'allowedHosts'>) {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new WebhookUrlRefusedError('webhook_url_invalid', 'The endpoint URL is not a valid absolute URL.')
  }
  const host = hostOf(url)
  const allowed = policy.allowedHosts.includes(host)
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && !policy.production && allowed))
    throw new WebhookUrlRefusedError('webhook_url_not_https', 'The endpoint URL must use https.')
  if (url.username || url.password) throw new WebhookUrlRefusedError('webhook_url_invalid', 'The endpoint URL may not carry credentials.')
  if (!allowed && isIP(host) !== 0)
    throw new WebhookUrlRefusedError('webhook_url_forbidden_address', 'The endpoint URL may not name an IP address.')
  return { url, host, allowed }
}

/** Every address the host resolves to, each one allowed; refused when any is forbidden or there is none. */
export async function checkedAddresses(host: string, policy: Pick<AddressPolicy, 'allowedHosts' | 'resolve'>) {
  let addresses: { address: string; family: number }[]
  try {
    addresses = await policy.resolve(host)
  } catch {
    addresses = []
  }
  if (addresses.length === 0) throw new WebhookUrlRefusedError('webhook_url_unresolvable', 'The endpoint host does not resolve.')
  if (!policy.allowedHosts.includes(host) && addresses.some((entry) => isForbiddenAddress(entry.address)))
    throw new WebhookUrlRefusedError('webhook_url_forbidden_address', 'The endpoint host resolves to a private or reserved address.')
  return addresses
}

/** At creation: the URL's rules, then its host resolved and every address checked. */
export async function checkWebhookUrl(text: string, policy: AddressPolicy): Promise<void> {
  const { host, allowed } = checkWebhookUrlShape(text, policy)
  if (!allowed) await checkedAddresses(host, policy)
}

/**
 * The socket lookup of every delivery connection: the host is resolved again at connect time and
 * the connection goes to an address that passed the check, so a DNS change between creation (or
 * the last send) and this connect cannot point a delivery at a private address.
 */
export function guardedLookup(policy: Pick<AddressPolicy, 'allowedHosts' | 'resolve'>): LookupFunction {
  return (hostname, options, callback) => {
    const host = hostname.replace(/^\[|\]$/g, '').toLowerCase()
    checkedAddresses(host, policy).then(
      (addresses) => {
        const wanted =
          options.family === 4 || options.family === 6 ? addresses.filter((entry) => entry.family === options.family) : addresses
        if (wanted.length === 0) return callback(Object.assign(new Error('no address of the wanted family'), { code: 'ENOTFOUND' }), '', 4)
        if (options.all) return (callback as unknown as (e: null, all: typeof wanted) => void)(null, wanted)
        callback(null, wanted[0]!.address, wanted[0]!.family)
      },
      (error: unknown) => callback(error as NodeJS.ErrnoException, '', 4),
    )
  }
}
