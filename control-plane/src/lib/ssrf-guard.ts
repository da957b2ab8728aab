import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { parseCidr, parseIp, inRange, specialPurpose, type IpAddress, type IpFamily, type IpRange } from '@xfer/shared/net';

/**
 * The SSRF guard of webhooks (decisions.md "Webhooks", docs/security.md "Webhook targets"): a
 * webhook may only reach public unicast addresses over https. Registration checks the URL with
 * `resolveSafeTarget`, and every delivery checks it again and connects to exactly the addresses
 * that were checked, so a name cannot be re-pointed at a private address between check and use.
 */

type Family = IpFamily;

/** Why `address` is refused by the fixed rules (every special-purpose range), phrased to follow "<address> is ", or null. */
function builtInRefusal(address: IpAddress): string | null {
  return specialPurpose(address)?.why ?? null;
}

/** Why an address may not be a webhook target, or null when it may. */
export class AddressPolicy {
  private readonly opened: IpRange[];

  /**
   * `unsafeAllowed`: config.webhooks.unsafeAllowedAddresses — IPs or CIDRs opened (tests only).
   * Each entry opens exactly the addresses of its own family that it lists: `127.0.0.1` opens
   * neither `::1` nor `::ffff:127.0.0.1`. Throws on an entry that is not an IP or CIDR.
   */
  constructor(unsafeAllowed: readonly string[], setting = 'XFER_UNSAFE_WEBHOOK_ALLOW') {
    this.opened = unsafeAllowed.map((entry) => {
      const parsed = parseCidr(entry.trim());
      if (!parsed) throw new Error(`${setting}: "${entry}" is not an IP address or CIDR range`);
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
    const parsed = parseIp(text);
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
  const { addresses } = await resolveSafeHost(parsed.hostname, policy, lookup);
  return { url: parsed, addresses };
}

/**
 * Checks a bare host name or IP literal (an SMTP server's, plugins/app/notifications) by the
 * rules of `resolveSafeTarget`: not `localhost`/`*.localhost`/empty, every resolved address
 * allowed by `policy`. Resolves with the host as checked (trailing dots removed, brackets kept
 * off) and the addresses to connect to. Rejects UnsafeUrlError; its message follows "host ".
 */
export async function resolveSafeHost(hostname: string, policy: AddressPolicy, lookup: Lookup = systemLookup):
  Promise<{ host: string; addresses: Array<{ address: string; family: 4 | 6 }> }> {
  // Trailing dots name the same host (`localhost.`); the URL keeps them, the checks must not.
  const host = hostname.replace(/\.+$/, '');
  if (host === '') throw new UnsafeUrlError('has no host', 'invalid');
  if (host === 'localhost' || host.endsWith('.localhost')) throw new UnsafeUrlError(`host ${host} is a loopback name`);

  const literal = host.replace(/^\[(.*)\]$/, '$1');
  const family = isIP(literal);
  if (family !== 0) {
    const why = policy.refusal(literal);
    if (why) throw new UnsafeUrlError(`host ${why}`);
    return { host: literal, addresses: [{ address: literal, family: family as Family }] };
  }

  const addresses = await resolveAll(host, lookup);
  if (addresses.length === 0) throw new UnsafeUrlError(`host ${host} resolves to no address`, 'unresolved');
  for (const { address } of addresses) {
    const why = policy.refusal(address);
    if (why) throw new UnsafeUrlError(`host ${host} resolves to a refused address: ${why}`);
  }
  return { host, addresses: addresses.map((a) => ({ address: a.address, family: isIP(a.address.replace(/%.*$/, '')) === 6 ? 6 : 4 })) };
}
