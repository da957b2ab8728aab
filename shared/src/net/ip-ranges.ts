import { isIP } from 'node:net';

/**
 * IP address classification shared by the control plane's SSRF guard (webhook targets,
 * control-plane/src/lib/ssrf-guard.ts) and the agent's network guard (the hosts an agent may
 * dial, agent/src/connectors/network-guard.ts): parsing of addresses and CIDR ranges, and the
 * IANA special-purpose ranges with what each one is. Pure: no DNS, no sockets.
 */

export type IpFamily = 4 | 6;
export interface IpAddress { family: IpFamily; bytes: Uint8Array }
export interface IpRange extends IpAddress { prefix: number }

/** Parses a canonical IP address (no zone, no brackets), or null. Leading-zero and short IPv4 forms are not addresses here. */
export function parseIp(text: string): IpAddress | null {
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

/** Parses `address/prefix` or a bare address (a range of one), or null. */
export function parseCidr(cidr: string): IpRange | null {
  const [address, bits, extra] = cidr.split('/');
  const parsed = address === undefined ? null : parseIp(address);
  if (!parsed || extra !== undefined) return null;
  const max = parsed.family === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  return Number.isInteger(prefix) && prefix >= 0 && prefix <= max ? { ...parsed, prefix } : null;
}

export function inRange(address: IpAddress, range: IpRange): boolean {
  if (address.family !== range.family) return false;
  for (let bit = 0; bit < range.prefix; bit += 8) {
    const mask = range.prefix - bit >= 8 ? 0xff : (0xff << (8 - (range.prefix - bit))) & 0xff;
    if ((address.bytes[bit / 8]! & mask) !== (range.bytes[bit / 8]! & mask)) return false;
  }
  return true;
}

/** True when every address of `inner` lies in `outer`. */
export function rangeWithin(inner: IpRange, outer: IpRange): boolean {
  return inner.prefix >= outer.prefix && inRange(inner, outer);
}

/** The IPv4 address in dotted decimal. */
export function v4Text(bytes: Uint8Array): string {
  return Array.from(bytes).join('.');
}

/**
 * What a special-purpose range is, for the rules built on it: `metadata` (cloud instance
 * metadata endpoints, which hand out credentials), `link-local`, `loopback`, `private` (RFC 1918,
 * unique-local), `other` (every other special-purpose range).
 */
export type RangeKind = 'metadata' | 'link-local' | 'loopback' | 'private' | 'other';

export interface SpecialRange { range: IpRange; kind: RangeKind; why: string }

const range = (cidr: string): IpRange => parseCidr(cidr)!;
const METADATA = 'a cloud metadata address';
const table = (rows: Array<[string, RangeKind, string]>): SpecialRange[] => rows.map(([cidr, kind, why]) => ({ range: range(cidr), kind, why }));

/**
 * Special-purpose IPv4 ranges, first match names the reason (IANA special-purpose registry,
 * RFC 6890 and successors). Metadata endpoints come first so the message says what they are.
 */
export const V4_SPECIAL: readonly SpecialRange[] = table([
  ['169.254.169.254/32', 'metadata', METADATA], // AWS, GCP, Azure, OCI, DigitalOcean, OpenStack
  ['169.254.170.2/32', 'metadata', METADATA], // AWS ECS task credentials
  ['169.254.170.23/32', 'metadata', METADATA], // AWS EKS pod identity
  ['100.100.100.200/32', 'metadata', METADATA], // Alibaba Cloud
  ['192.0.0.192/32', 'metadata', METADATA], // Oracle Cloud (legacy)
  ['255.255.255.255/32', 'other', 'the broadcast address'],
  ['0.0.0.0/8', 'other', 'an unspecified ("this network") address'],
  ['10.0.0.0/8', 'private', 'a private address'],
  ['100.64.0.0/10', 'private', 'a carrier-grade NAT (shared) address'],
  ['127.0.0.0/8', 'loopback', 'a loopback address'],
  ['169.254.0.0/16', 'link-local', 'a link-local address'],
  ['172.16.0.0/12', 'private', 'a private address'],
  ['192.0.0.0/24', 'other', 'an IETF protocol assignment address'],
  ['192.0.2.0/24', 'other', 'a documentation address'],
  ['192.88.99.0/24', 'other', 'a 6to4 relay anycast address'],
  ['192.168.0.0/16', 'private', 'a private address'],
  ['198.18.0.0/15', 'other', 'a benchmarking address'],
  ['198.51.100.0/24', 'other', 'a documentation address'],
  ['203.0.113.0/24', 'other', 'a documentation address'],
  ['224.0.0.0/4', 'other', 'a multicast address'],
  ['240.0.0.0/4', 'other', 'a reserved address'],
]);

/** IPv6 prefixes that carry an IPv4 address: judged by the IPv4 address they lead to. */
export const V6_EMBEDDING: ReadonlyArray<[IpRange, string, (b: Uint8Array) => Uint8Array]> = [
  [range('::ffff:0:0/96'), 'an IPv4-mapped', (b) => b.slice(12, 16)],
  [range('64:ff9b::/96'), 'a NAT64', (b) => b.slice(12, 16)],
  [range('2002::/16'), 'a 6to4', (b) => b.slice(2, 6)],
];

/** Special-purpose IPv6 ranges, first match names the reason. Everything outside 2000::/3 is special after these. */
export const V6_SPECIAL: readonly SpecialRange[] = table([
  ['fd00:ec2::254/128', 'metadata', METADATA], // AWS IMDS over IPv6
  ['::/128', 'other', 'the unspecified address'],
  ['::1/128', 'loopback', 'a loopback address'],
  ['::/96', 'other', 'an IPv4-compatible address (deprecated)'],
  ['::ffff:0:0:0/96', 'other', 'an IPv4-translated address'],
  ['64:ff9b:1::/48', 'other', 'a local-use NAT64 address'],
  ['100::/64', 'other', 'a discard-only address'],
  // Teredo tunnels to a client address hidden in the address through relays: special as a whole.
  ['2001::/32', 'other', 'a Teredo address'],
  ['2001:2::/48', 'other', 'a benchmarking address'],
  ['2001::/23', 'other', 'an IETF protocol assignment address'],
  ['2001:db8::/32', 'other', 'a documentation address'],
  ['3fff::/20', 'other', 'a documentation address'],
  ['5f00::/16', 'other', 'a segment routing (SRv6) address'],
  ['fc00::/7', 'private', 'a unique-local address'],
  ['fe80::/10', 'link-local', 'a link-local address'],
  ['fec0::/10', 'other', 'a site-local address (deprecated)'],
  ['ff00::/8', 'other', 'a multicast address'],
]);

const GLOBAL_UNICAST_V6 = range('2000::/3');

/**
 * The special-purpose range `address` lies in: its kind and why, phrased to follow
 * "<address> is ", or null for a global unicast address. IPv4 embedded in IPv6 (IPv4-mapped,
 * NAT64 64:ff9b::/96, 6to4) is judged by the IPv4 address ("an IPv4-mapped form of 127.0.0.1,
 * a loopback address", kind of the IPv4 address); every IPv6 address outside 2000::/3 is `other`.
 */
export function specialPurpose(address: IpAddress): { kind: RangeKind; why: string } | null {
  const first = (rows: readonly SpecialRange[]) => rows.find((r) => inRange(address, r.range)) ?? null;
  if (address.family === 4) return first(V4_SPECIAL);
  for (const [r, kind, embedded] of V6_EMBEDDING) {
    if (!inRange(address, r)) continue;
    const v4 = embedded(address.bytes);
    const found = specialPurpose({ family: 4, bytes: v4 });
    return found && { kind: found.kind, why: `${kind} form of ${v4Text(v4)}, ${found.why}` };
  }
  const found = first(V6_SPECIAL);
  if (found) return found;
  return inRange(address, GLOBAL_UNICAST_V6) ? null : { kind: 'other', why: 'not a global unicast address' };
}

/** The IPv4 address an IPv6 address carries (IPv4-mapped, NAT64, 6to4), or the address itself. */
export function unwrapV4(address: IpAddress): IpAddress {
  if (address.family === 6) {
    for (const [r, , embedded] of V6_EMBEDDING) if (inRange(address, r)) return { family: 4, bytes: embedded(address.bytes) };
  }
  return address;
}
