import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';

/**
 * The SSRF guard of webhooks (decisions.md "Webhooks", docs/security.md "Webhook targets"): a
 * webhook may only reach public unicast addresses over https. Registration checks the URL with
 * `resolveSafeTarget`, and every delivery checks it again and connects to exactly the addresses
 * that were checked, so a name cannot be re-pointed at a private address between check and use.
 */

type Family = 4 | 6;
interface Parsed { family: Family; bytes: Uint8Array }
interface Range extends Parsed { prefix: number }

/** Parses a canonical IP address (no zone, no brackets), or null. Leading-zero and short IPv4 forms are not addresses here. */
function parseAddress(text: string): Parsed | null {
  const family = isIP(text);
  if (family === 4) return { family: 4, bytes: Uint8Array.from(text.split('.').map(Number)) };
  if (family !== 6) return null;
  // A trailing dotted quad (::ffff:1.2.3.4) stands for the last two groups.
  let body = text;
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(body);
  if (quad) {
    const b = quad[1]!.split('.').map(Number);
    body = `${body.slice(0, quad.index)}${((b[0]! << 8) | b[1]!).toString(16)}:${((b[2]! << 8) | b[3]!).toString(16)}`;
  }
  const [head, tail] = body.split('::') as [string, string | undefined];
  const groups = (s: string | undefined) => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const left = groups(head);
  const right = groups(tail);
  const all = tail === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  const bytes = new Uint8Array(16);
  all.forEach((g, i) => { bytes[2 * i] = g >> 8; bytes[2 * i + 1] = g & 0xff; });
  return { family: 6, bytes };
}

function parseRange(cidr: string): Range | null {
  const [address, bits, extra] = cidr.split('/');
  const parsed = address === undefined ? null : parseAddress(address);
  if (!parsed || extra !== undefined) return null;
  const max = parsed.family === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  return Number.isInteger(prefix) && prefix >= 0 && prefix <= max ? { ...parsed, prefix } : null;
}

function inRange(address: Parsed, range: Range): boolean {
  if (address.family !== range.family) return false;
  for (let bit = 0; bit < range.prefix; bit += 8) {
    const mask = range.prefix - bit >= 8 ? 0xff : (0xff << (8 - (range.prefix - bit))) & 0xff;
    if ((address.bytes[bit / 8]! & mask) !== (range.bytes[bit / 8]! & mask)) return false;
  }
  return true;
}

const range = (cidr: string): Range => parseRange(cidr)!;
const METADATA = 'a cloud metadata address';

/**
 * Refused IPv4 ranges, first match names the reason (IANA special-purpose registry, RFC 6890 and
 * successors). Metadata endpoints come first only so the message says what they are.
 */
const V4_REFUSED: ReadonlyArray<[Range, string]> = ([
  ['169.254.169.254/32', METADATA], // AWS, GCP, Azure, OCI, DigitalOcean, OpenStack
  ['169.254.170.2/32', METADATA], // AWS ECS task credentials
  ['169.254.170.23/32', METADATA], // AWS EKS pod identity
  ['100.100.100.200/32', METADATA], // Alibaba Cloud
  ['192.0.0.192/32', METADATA], // Oracle Cloud (legacy)
  ['255.255.255.255/32', 'the broadcast address'],
  ['0.0.0.0/8', 'an unspecified ("this network") address'],
  ['10.0.0.0/8', 'a private address'],
  ['100.64.0.0/10', 'a carrier-grade NAT (shared) address'],
  ['127.0.0.0/8', 'a loopback address'],
  ['169.254.0.0/16', 'a link-local address'],
  ['172.16.0.0/12', 'a private address'],
  ['192.0.0.0/24', 'an IETF protocol assignment address'],
  ['192.0.2.0/24', 'a documentation address'],
  ['192.88.99.0/24', 'a 6to4 relay anycast address'],
  ['192.168.0.0/16', 'a private address'],
  ['198.18.0.0/15', 'a benchmarking address'],
  ['198.51.100.0/24', 'a documentation address'],
  ['203.0.113.0/24', 'a documentation address'],
  ['224.0.0.0/4', 'a multicast address'],
  ['240.0.0.0/4', 'a reserved address'],
] as Array<[string, string]>).map(([cidr, why]) => [range(cidr), why]);

/** IPv6 prefixes that carry an IPv4 address: judged by the IPv4 address they lead to. */
const V6_EMBEDDING: ReadonlyArray<[Range, string, (b: Uint8Array) => Uint8Array]> = [
  [range('::ffff:0:0/96'), 'an IPv4-mapped', (b) => b.slice(12, 16)],
  [range('64:ff9b::/96'), 'a NAT64', (b) => b.slice(12, 16)],
  [range('2002::/16'), 'a 6to4', (b) => b.slice(2, 6)],
];

/** Refused IPv6 ranges, first match names the reason. Everything outside 2000::/3 is refused after these. */
const V6_REFUSED: ReadonlyArray<[Range, string]> = ([
  ['fd00:ec2::254/128', METADATA], // AWS IMDS over IPv6
  ['::/128', 'the unspecified address'],
  ['::1/128', 'a loopback address'],
  ['::/96', 'an IPv4-compatible address (deprecated)'],
  ['::ffff:0:0:0/96', 'an IPv4-translated address'],
  ['64:ff9b:1::/48', 'a local-use NAT64 address'],
  ['100::/64', 'a discard-only address'],
  // Teredo tunnels to a client address hidden in the address through relays: refused whole.
  ['2001::/32', 'a Teredo address'],
  ['2001:2::/48', 'a benchmarking address'],
  ['2001::/23', 'an IETF protocol assignment address'],
  ['2001:db8::/32', 'a documentation address'],
  ['3fff::/20', 'a documentation address'],
  ['5f00::/16', 'a segment routing (SRv6) address'],
  ['fc00::/7', 'a unique-local address'],
  ['fe80::/10', 'a link-local address'],
  ['fec0::/10', 'a site-local address (deprecated)'],
  ['ff00::/8', 'a multicast address'],
] as Array<[string, string]>).map(([cidr, why]) => [range(cidr), why]);

const GLOBAL_UNICAST_V6 = range('2000::/3');

function v4Text(bytes: Uint8Array): string {
  return Array.from(bytes).join('.');
}

/** Why `address` is refused by the fixed rules, phrased to follow "<address> is ", or null. */
function builtInRefusal(address: Parsed): string | null {
  if (address.family === 4) return V4_REFUSED.find(([r]) => inRange(address, r))?.[1] ?? null;
  for (const [r, kind, embedded] of V6_EMBEDDING) {
    if (!inRange(address, r)) continue;
    const v4 = embedded(address.bytes);
    const why = builtInRefusal({ family: 4, bytes: v4 });
    return why && `${kind} form of ${v4Text(v4)}, ${why}`;
  }
  const refused = V6_REFUSED.find(([r]) => inRange(address, r));
  if (refused) return refused[1];
  return inRange(address, GLOBAL_UNICAST_V6) ? null : 'not a global unicast address';
}

/** Why an address may not be a webhook target, or null when it may. */
export class AddressPolicy {
  private readonly opened: Range[];

  /**
   * `unsafeAllowed`: config.webhooks.unsafeAllowedAddresses — IPs or CIDRs opened (tests only).
   * Each entry opens exactly the addresses of its own family that it lists: `127.0.0.1` opens
   * neither `::1` nor `::ffff:127.0.0.1`. Throws on an entry that is not an IP or CIDR.
   */
  constructor(unsafeAllowed: readonly string[]) {
    this.opened = unsafeAllowed.map((entry) => {
      const parsed = parseRange(entry.trim());
      if (!parsed) throw new Error(`XFER_UNSAFE_WEBHOOK_ALLOW: "${entry}" is not an IP address or CIDR range`);
      return parsed;
    });
  }

  /** True when the unsafe allow-list opens anything (logged as unsafe at start). */
  get unsafe(): boolean {
    return this.opened.length > 0;
  }

  /**
   * e.g. "127.0.0.1 is a loopback address"; null when allowed. Takes an IP address as the
   * resolver or the URL parser writes it (brackets and an IPv6 zone are tolerated); anything
   * else is refused. IPv4 embedded in IPv6 (IPv4-mapped, NAT64 64:ff9b::/96, 6to4) is judged by
   * the IPv4 address; IPv4-compatible, IPv4-translated, local NAT64, Teredo and every IPv6
   * address outside 2000::/3 are refused whole.
   */
  refusal(address: string): string | null {
    const text = address.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
    const parsed = parseAddress(text);
    if (!parsed) return `${address} is not an IP address`;
    if (this.opened.some((r) => inRange(parsed, r))) return null;
    const why = builtInRefusal(parsed);
    return why && `${address} is ${why}`;
  }
}

/** Resolves a host name to every address it has (the shape of `dns.lookup(name, {all: true})`). */
export type Lookup = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

/** Why a URL was refused: `invalid` (not an https URL we accept), `refused` (a forbidden target), `unresolved` (DNS gave no answer; may be transient). */
export type UnsafeUrlKind = 'invalid' | 'refused' | 'unresolved';

/** A webhook URL that may not be used; `message` is the user-facing reason (it follows "url "). */
export class UnsafeUrlError extends Error {
  constructor(message: string, readonly kind: UnsafeUrlKind = 'refused') {
    super(message);
    this.name = 'UnsafeUrlError';
  }
}

const LOOKUP_TIMEOUT_MS = 5000;

const systemLookup: Lookup = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));

async function resolveAll(hostname: string, lookup: Lookup): Promise<Array<{ address: string; family: 4 | 6 }>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('timeout'), { code: 'ETIMEOUT' })), LOOKUP_TIMEOUT_MS);
  });
  try {
    return await Promise.race([lookup(hostname), timeout]);
  } catch (err) {
    const code = (err as { code?: string }).code ?? 'error';
    throw new UnsafeUrlError(`host ${hostname} could not be resolved (${code})`, 'unresolved');
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Parses and checks a webhook URL: https only, no credentials in it, a host that is not
 * `localhost`/`*.localhost`/empty, every resolved address allowed by `policy` (ALL addresses of
 * the name must be allowed, not just one). Resolves with the URL (WHATWG-normalized: every IPv4
 * spelling is dotted decimal by then) and the checked addresses, which the deliverer then
 * connects to directly (no second lookup: DNS rebinding). An IP literal is not looked up.
 * Rejects UnsafeUrlError with the reason. `lookup` defaults to dns.lookup(all: true, verbatim).
 */
export async function resolveSafeTarget(url: string, policy: AddressPolicy, lookup: Lookup = systemLookup):
  Promise<{ url: URL; addresses: Array<{ address: string; family: 4 | 6 }> }> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UnsafeUrlError('is not a valid absolute URL', 'invalid');
  }
  if (parsed.protocol !== 'https:') throw new UnsafeUrlError(`must use https (got ${parsed.protocol.slice(0, 20)})`, 'invalid');
  if (parsed.username || parsed.password) throw new UnsafeUrlError('must not contain credentials (user:password@)', 'invalid');
  // Trailing dots name the same host (`localhost.`); the URL keeps them, the checks must not.
  const host = parsed.hostname.replace(/\.+$/, '');
  if (host === '') throw new UnsafeUrlError('has no host', 'invalid');
  if (host === 'localhost' || host.endsWith('.localhost')) throw new UnsafeUrlError(`host ${host} is a loopback name`);

  const literal = host.replace(/^\[(.*)\]$/, '$1');
  const family = isIP(literal);
  if (family !== 0) {
    const why = policy.refusal(literal);
    if (why) throw new UnsafeUrlError(`host ${why}`);
    return { url: parsed, addresses: [{ address: literal, family: family as Family }] };
  }

  const addresses = await resolveAll(host, lookup);
  if (addresses.length === 0) throw new UnsafeUrlError(`host ${host} resolves to no address`, 'unresolved');
  for (const { address } of addresses) {
    const why = policy.refusal(address);
    if (why) throw new UnsafeUrlError(`host ${host} resolves to a refused address: ${why}`);
  }
  return { url: parsed, addresses: addresses.map((a) => ({ address: a.address, family: isIP(a.address.replace(/%.*$/, '')) === 6 ? 6 : 4 })) };
}
