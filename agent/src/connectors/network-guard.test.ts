import type { LookupAddress } from 'node:dns';
import { NetworkGuard, NetworkRefusal, type NetworkRules } from './network-guard.js';

/** A resolver with fixed answers, as a DNS server controlled by an attacker would give them. */
function resolverOf(table: Record<string, string[]>) {
  return async (host: string): Promise<LookupAddress[]> => {
    const addresses = table[host];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

const guard = (rules: Partial<NetworkRules> = {}, table: Record<string, string[]> = {}) =>
  new NetworkGuard({ allowHosts: [], denyHosts: [], ...rules }, resolverOf(table));

describe('NetworkGuard rules (the host lists of docs/agent.md)', () => {
  test('cloud metadata endpoints are refused by default, in every spelling, naming the setting that opens them', () => {
    const g = guard();
    for (const host of ['169.254.169.254', '169.254.170.2', '100.100.100.200', 'fd00:ec2::254', '[fd00:ec2::254]', '::ffff:169.254.169.254', '::ffff:a9fe:a9fe']) {
      expect(g.refusal(host)).toMatch(/is a cloud metadata address, denied by default \(allow it with --allow-hosts, XFER_AGENT_ALLOW_HOSTS or "allow_hosts"/);
    }
    for (const host of ['metadata.google.internal', 'METADATA.GOOGLE.INTERNAL.', 'metadata', 'instance-data.ec2.internal']) {
      expect(g.refusal(host)).toMatch(/is a cloud metadata host, denied by default/);
    }
  });

  test('link-local is refused by default; loopback, private and public addresses are allowed', () => {
    const g = guard();
    expect(g.refusal('169.254.1.1')).toMatch(/the agent may not connect to 169.254.1.1: 169.254.1.1 is a link-local address, denied by default .*inside 169.254.0.0\/16/);
    expect(g.refusal('fe80::1')).toMatch(/fe80::1 is a link-local address, denied by default .*inside fe80::\/10/);
    for (const host of ['127.0.0.1', '::1', '10.1.2.3', '172.16.0.9', '192.168.1.1', 'fd12:3456::1', '100.64.0.1', '8.8.8.8', '2001:4860::8888', 'files.example.com']) {
      expect(g.refusal(host)).toBeNull();
    }
  });

  test('an allow entry opens a default-denied range only when it lies inside it', () => {
    expect(guard({ allowHosts: ['0.0.0.0/0', '::/0'] }).refusal('169.254.169.254')).toMatch(/denied by default/);
    expect(guard({ allowHosts: ['169.254.0.0/16'] }).refusal('169.254.169.254')).toMatch(/denied by default/);
    expect(guard({ allowHosts: ['169.254.169.254'] }).refusal('169.254.169.254')).toBeNull();
    expect(guard({ allowHosts: ['169.254.10.0/24'] }).refusal('169.254.10.7')).toBeNull();
    expect(guard({ allowHosts: ['169.254.10.0/24'] }).refusal('169.254.11.7')).toMatch(/link-local address, denied by default/);
    expect(guard({ allowHosts: ['*.internal'] }).refusal('metadata.google.internal')).toMatch(/cloud metadata host/);
    expect(guard({ allowHosts: ['metadata.google.internal'] }).refusal('metadata.google.internal')).toBeNull();
  });

  test('deny beats allow, for names and ranges, IPv4 inside IPv6 included', () => {
    const g = guard({ allowHosts: ['10.0.0.0/8', '*.example.com'], denyHosts: ['10.9.0.0/16', 'secret.example.com'] });
    expect(g.refusal('10.1.0.1')).toBeNull();
    expect(g.refusal('10.9.0.1')).toMatch(/10.9.0.1 is in "10.9.0.0\/16" of the agent's --deny-hosts, XFER_AGENT_DENY_HOSTS or "deny_hosts"/);
    expect(g.refusal('::ffff:10.9.0.1')).toMatch(/is in "10.9.0.0\/16"/);
    expect(g.refusal('secret.example.com')).toMatch(/secret.example.com matches "secret.example.com" in the agent's --deny-hosts/);
    expect(g.refusal('Secret.Example.COM.')).toMatch(/matches "secret.example.com"/);
    expect(g.refusal('files.example.com', '10.1.2.3')).toBeNull();
    expect(g.refusal('files.example.com', '10.9.2.3')).toMatch(/files.example.com \(10.9.2.3\): 10.9.2.3 is in "10.9.0.0\/16"/);
  });

  test('a non-empty allow list lets through only what it names; loopback can be denied', () => {
    const g = guard({ allowHosts: ['192.168.10.0/24', 'nas.example.com'] });
    expect(g.refusal('192.168.10.5')).toBeNull();
    expect(g.refusal('nas.example.com', '10.0.0.1')).toBeNull();
    expect(g.refusal('192.168.11.5')).toMatch(/it is not in the agent's allow_hosts \(add it to --allow-hosts/);
    expect(g.refusal('other.example.com', '8.8.8.8')).toMatch(/other.example.com \(8.8.8.8\): it is not in the agent's allow_hosts/);
    // A name not resolved yet is judged on its address later.
    expect(g.refusal('other.example.com')).toBeNull();
    expect(guard({ denyHosts: ['127.0.0.0/8', '::1'] }).refusal('::1')).toMatch(/is in "::1"/);
  });

  test('resolve refuses a name when any address it resolves to is refused (no picking the harmless one)', async () => {
    const g = guard({}, { 'mixed.example.com': ['93.184.216.34', '169.254.169.254'], 'ok.example.com': ['93.184.216.34'] });
    await expect(g.resolve('mixed.example.com')).rejects.toThrow(NetworkRefusal);
    await expect(g.resolve('mixed.example.com')).rejects.toMatchObject({ code: 'PERMISSION', message: expect.stringContaining('mixed.example.com (169.254.169.254): 169.254.169.254 is a cloud metadata address') });
    await expect(g.resolve('ok.example.com')).resolves.toEqual([{ address: '93.184.216.34', family: 4 }]);
    await expect(g.resolve('no.example.com')).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  test('the lookup function answers as dns.lookup does, refusing as resolve does', async () => {
    const g = guard({}, { 'two.example.com': ['::1', '127.0.0.1'], 'bad.example.com': ['fe80::1'] });
    const lookup = (host: string, options: { all?: boolean; family?: number }) => new Promise<unknown>((resolve, reject) => {
      g.lookup(host, options as never, (err: NodeJS.ErrnoException | null, address: unknown, family?: number) => (err ? reject(err) : resolve(options.all ? address : { address, family })));
    });
    await expect(lookup('two.example.com', { all: true })).resolves.toEqual([{ address: '::1', family: 6 }, { address: '127.0.0.1', family: 4 }]);
    await expect(lookup('two.example.com', { family: 4 })).resolves.toEqual({ address: '127.0.0.1', family: 4 });
    await expect(lookup('bad.example.com', {})).rejects.toMatchObject({ code: 'PERMISSION', message: expect.stringContaining('link-local') });
  });

  test('malformed entries are refused naming the setting', () => {
    expect(() => guard({ allowHosts: ['10.0.0.0/33'] })).toThrow(/allow_hosts: "10.0.0.0\/33" is not an IP address, CIDR range, host name or \*.domain/);
    expect(() => guard({ denyHosts: ['http://x'] })).toThrow(/deny_hosts: "http:\/\/x"/);
    expect(() => guard({ denyHosts: ['1.2.3'] })).toThrow(/deny_hosts: "1.2.3"/);
  });
});
