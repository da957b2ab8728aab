import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import type { Agent as HttpAgent } from 'node:http';
import { connect, isIP, Socket, type LookupFunction, type NetConnectOpts } from 'node:net';
import { inRange, parseCidr, parseIp, rangeWithin, unwrapV4, V4_SPECIAL, V6_SPECIAL, type IpAddress, type IpRange, type SpecialRange } from '@xfer/shared/net';
import { ConnectorError } from './types.js';

/**
 * The hosts the agent may dial (docs/agent.md "What the agent may touch", docs/security.md).
 * Every socket a connector opens goes through one `NetworkGuard`: raw sockets through `connect`,
 * node:http(s) agents (AWS SDK, Azure SDK, WebDAV, OneDrive) through `protect`, and libraries
 * that take an address (basic-ftp) through `resolve`. The guard checks the address actually
 * connected to: names are resolved by its own lookup function, which refuses the connection when
 * any address the name resolves to is refused, so re-pointing a name (DNS rebinding) after a
 * check gains nothing.
 *
 * Rules, in order: an entry of `deny_hosts` matching the name or the address refuses; a cloud
 * metadata or link-local address (and the metadata host names) is refused unless an
 * `allow_hosts` entry opens it explicitly (a name equal to it, or a CIDR lying inside the
 * metadata or link-local range: `0.0.0.0/0` opens nothing of them); when `allow_hosts` is not
 * empty, only what matches it is dialed. Loopback and private ranges are allowed by default
 * (agents live in private networks) unless denied.
 */
export interface NetworkRules {
  /** IPs, CIDRs, host names and `*.domain` suffixes; empty: every host that is not denied. */
  allowHosts: readonly string[];
  /** Same forms; beats `allowHosts`. */
  denyHosts: readonly string[];
}

/** Host names of cloud metadata services, denied like their addresses (they resolve to them anyway). */
export const METADATA_HOST_NAMES = ['metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal'] as const;

const ALLOW_HINT = 'allow it with --allow-hosts, XFER_AGENT_ALLOW_HOSTS or "allow_hosts" in the agent\'s config file';
const DENY_HINT = 'the agent\'s --deny-hosts, XFER_AGENT_DENY_HOSTS or "deny_hosts" in its config file';

/** A connection the agent's owner does not allow: PERMISSION, never retried. */
export class NetworkRefusal extends ConnectorError {
  constructor(message: string) {
    super('PERMISSION', message);
    this.name = 'NetworkRefusal';
  }

  /**
   * The refusal inside `err`, for libraries that wrap socket errors: through `cause`, or copied
   * into an error of their own that kept only the code and message (the Azure SDK's RestError).
   */
  static within(err: unknown): NetworkRefusal | null {
    for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
      if (e instanceof NetworkRefusal) return e;
      if ((e as { code?: unknown }).code === 'PERMISSION' && e.message.startsWith(REFUSAL_PREFIX)) return new NetworkRefusal(e.message);
    }
    return null;
  }
}

const REFUSAL_PREFIX = 'the agent may not connect to ';

interface HostList {
  ranges: Array<{ entry: string; range: IpRange }>;
  names: Array<{ entry: string; match: (name: string) => boolean }>;
}

/** A host name as compared: lower case, no trailing dot. */
function normalName(name: string): string {
  return name.toLowerCase().replace(/\.+$/, '');
}

/**
 * Parses allow/deny entries; throws Error naming the bad entry (config.ts turns it into a
 * usage error). `*.example.com` (or `.example.com`) matches every name below example.com.
 */
export function parseHostList(entries: readonly string[], setting: string): HostList {
  const list: HostList = { ranges: [], names: [] };
  for (const raw of entries) {
    const entry = raw.trim();
    const range = parseCidr(entry.replace(/^\[(.*)\]$/, '$1'));
    if (range) {
      list.ranges.push({ entry, range });
      continue;
    }
    const name = normalName(entry);
    const suffix = /^\*?\.(.+)$/.exec(name)?.[1];
    const label = /^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?$/;
    const valid = (n: string) => n.length <= 253 && n.split('.').every((l) => label.test(l) && l.length <= 63);
    if (suffix !== undefined && valid(suffix)) list.names.push({ entry, match: (n) => n.endsWith(`.${suffix}`) });
    else if (valid(name) && !/^[\d.]+$/.test(name)) list.names.push({ entry, match: (n) => n === name });
    else throw new Error(`${setting}: "${entry}" is not an IP address, CIDR range, host name or *.domain`);
  }
  return list;
}

function matchAddress(list: HostList, address: IpAddress): string | null {
  const v4 = unwrapV4(address);
  return list.ranges.find(({ range }) => inRange(address, range) || (v4 !== address && inRange(v4, range)))?.entry ?? null;
}

function matchName(list: HostList, name: string | null): string | null {
  return name === null ? null : list.names.find(({ match }) => match(name))?.entry ?? null;
}

/** The special-purpose range an address (or the IPv4 address it carries) lies in. */
function specialRow(address: IpAddress): SpecialRange | null {
  const a = unwrapV4(address);
  return (a.family === 4 ? V4_SPECIAL : V6_SPECIAL).find((row) => inRange(a, row.range)) ?? null;
}

export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) => dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))));

export class NetworkGuard {
  private readonly allow: HostList;
  private readonly deny: HostList;

  /** Throws Error naming a malformed entry. `resolver` defaults to dns.lookup (tests hand in a fixed one). */
  constructor(rules: NetworkRules, private readonly resolver: Resolver = systemResolver) {
    this.allow = parseHostList(rules.allowHosts, 'allow_hosts');
    this.deny = parseHostList(rules.denyHosts, 'deny_hosts');
  }

  /**
   * Why dialing `host` (a name or an IP literal) at `address` is refused, or null. With no
   * address (a name not resolved yet), only the rules on names apply.
   */
  refusal(host: string, address?: string): string | null {
    const literal = host.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
    const name = isIP(literal) ? null : normalName(host);
    const text = address?.replace(/%.*$/, '') ?? (name === null ? literal : undefined);
    const ip = text === undefined ? null : parseIp(text);
    const target = name !== null && text !== undefined ? `${host} (${text})` : host;
    const refuse = (why: string) => `${REFUSAL_PREFIX}${target}: ${why}`;

    const deniedName = matchName(this.deny, name);
    if (deniedName) return refuse(`${name} matches "${deniedName}" in ${DENY_HINT}`);
    const allowedName = matchName(this.allow, name);
    if (name !== null && (METADATA_HOST_NAMES as readonly string[]).includes(name) && !this.allow.names.some(({ entry }) => normalName(entry) === name)) {
      return refuse(`${name} is a cloud metadata host, denied by default (${ALLOW_HINT}, naming exactly ${name})`);
    }
    if (text !== undefined && !ip) return refuse(`${text} is not an IP address`);
    if (!ip) return null;

    const deniedRange = matchAddress(this.deny, ip);
    if (deniedRange) return refuse(`${text} is in "${deniedRange}" of ${DENY_HINT}`);
    const row = specialRow(ip);
    if (row && (row.kind === 'metadata' || row.kind === 'link-local')) {
      const v4 = unwrapV4(ip);
      const opened = this.allow.ranges.some(({ range }) => rangeWithin(range, row.range) && inRange(v4, range));
      if (!opened) return refuse(`${text} is ${row.why}, denied by default (${ALLOW_HINT}: an entry inside ${rangeText(row)})`);
    }
    if (this.allow.ranges.length + this.allow.names.length > 0 && !allowedName && !matchAddress(this.allow, ip)) {
      return refuse(`it is not in the agent's allow_hosts (add it to --allow-hosts, XFER_AGENT_ALLOW_HOSTS or "allow_hosts" in the agent's config file)`);
    }
    return null;
  }

  /** Throws NetworkRefusal when `host` is refused before any lookup (an IP literal, or a denied name). */
  check(host: string): void {
    const why = this.refusal(host);
    if (why) throw new NetworkRefusal(why);
  }

  /**
   * Every address of `host`, each checked; rejects NetworkRefusal when any is refused (a name
   * must not lead to a denied address through one of its records), or the resolver's error.
   */
  async resolve(host: string): Promise<LookupAddress[]> {
    this.check(host);
    const literal = host.replace(/^\[(.*)\]$/, '$1');
    const family = isIP(literal);
    if (family !== 0) return [{ address: literal, family }];
    const addresses = await this.resolver(host);
    for (const { address } of addresses) {
      const why = this.refusal(host, address);
      if (why) throw new NetworkRefusal(why);
    }
    return addresses;
  }

  /** A `lookup` for net.connect, tls.connect and http(s) agents: `resolve`, in dns.lookup's shape. */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.resolve(hostname).then((all) => {
      const wanted = options.family === 4 || options.family === 6 ? all.filter((a) => a.family === options.family) : all;
      if (wanted.length === 0) {
        callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname }), '', 0);
      } else if (options.all) callback(null, wanted);
      else callback(null, wanted[0]!.address, wanted[0]!.family);
    }, (err: NodeJS.ErrnoException) => callback(err, '', 0));
  };

  /**
   * net.connect through the guard: a refused IP literal gives a socket that fails with the
   * NetworkRefusal (as a refused connection would), a name is resolved by `lookup`.
   */
  connect(options: NetConnectOpts & { host: string; port: number }): Socket {
    const why = this.refusal(options.host);
    if (why) {
      const socket = new Socket();
      process.nextTick(() => socket.destroy(new NetworkRefusal(why)));
      return socket;
    }
    return connect({ ...options, lookup: this.lookup });
  }

  /**
   * `agent` (node:http or node:https) with every connection it opens checked: IP literals before
   * the socket is made, names through `lookup`. Returns the same agent.
   */
  protect<A extends HttpAgent>(agent: A): A {
    const guarded = agent as unknown as { createConnection: (options: Record<string, unknown>, cb: (err: Error | null, socket?: Socket) => void) => Socket | undefined };
    const original = guarded.createConnection.bind(agent);
    guarded.createConnection = (options, cb) => {
      const why = this.refusal(String(options.host ?? 'localhost'));
      if (why) {
        process.nextTick(() => cb(new NetworkRefusal(why)));
        return undefined;
      }
      return original({ ...options, lookup: this.lookup }, cb);
    };
    return agent;
  }
}

function rangeText(row: SpecialRange): string {
  const { range } = row;
  if (range.family === 4) return `${Array.from(range.bytes).join('.')}/${range.prefix}`;
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((range.bytes[i]! << 8) | range.bytes[i + 1]!).toString(16));
  return `${groups.join(':').replace(/(^|:)0(:0)+(:|$)/, '::')}/${range.prefix}`;
}
