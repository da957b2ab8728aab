import { jest } from '@jest/globals';
import { AddressPolicy, resolveSafeTarget, UnsafeUrlError, type Lookup } from './ssrf-guard.js';

const policy = new AddressPolicy([]);

/** A resolver that knows only `names`; anything else is NXDOMAIN, and nothing reaches real DNS. */
function fakeDns(names: Record<string, string[]>): Lookup & { asked: string[] } {
  const asked: string[] = [];
  const lookup = async (hostname: string) => {
    asked.push(hostname);
    const addresses = names[hostname];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: (address.includes(':') ? 6 : 4) as 4 | 6 }));
  };
  return Object.assign(lookup, { asked });
}

const NO_DNS = fakeDns({});

/** The reason a URL is refused (whatever layer refused it), or null when it is accepted. */
async function verdict(url: string, lookup: Lookup = NO_DNS, p: AddressPolicy = policy): Promise<string | null> {
  try {
    await resolveSafeTarget(url, p, lookup);
    return null;
  } catch (err) {
    if (!(err instanceof UnsafeUrlError)) throw err;
    return err.message;
  }
}

describe('AddressPolicy.refusal: addresses as a resolver writes them', () => {
  const REFUSED: Array<[string, RegExp]> = [
    ['127.0.0.1', /loopback/],
    ['127.255.255.254', /loopback/],
    ['10.0.0.1', /private/],
    ['172.16.0.1', /private/],
    ['172.31.255.255', /private/],
    ['192.168.1.1', /private/],
    ['169.254.1.1', /link-local/],
    ['169.254.169.254', /cloud metadata/],
    ['169.254.170.2', /cloud metadata/],
    ['100.100.100.200', /cloud metadata/],
    ['192.0.0.192', /cloud metadata/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['100.127.255.255', /carrier-grade NAT/],
    ['0.0.0.0', /unspecified/],
    ['0.1.2.3', /unspecified/],
    ['224.0.0.1', /multicast/],
    ['239.255.255.250', /multicast/],
    ['255.255.255.255', /broadcast/],
    ['240.0.0.1', /reserved/],
    ['192.0.2.10', /documentation/],
    ['198.51.100.10', /documentation/],
    ['203.0.113.10', /documentation/],
    ['198.18.0.1', /benchmarking/],
    ['192.88.99.1', /6to4 relay/],
    ['::1', /loopback/],
    ['::', /unspecified/],
    ['fe80::1', /link-local/],
    ['fe80::1%eth0', /link-local/],
    ['febf:ffff::1', /link-local/],
    ['fc00::1', /unique-local/],
    ['fd12:3456::1', /unique-local/],
    ['fd00:ec2::254', /cloud metadata/],
    ['ff02::1', /multicast/],
    ['fec0::1', /site-local/],
    ['::ffff:127.0.0.1', /IPv4-mapped form of 127\.0\.0\.1, a loopback/],
    ['::ffff:7f00:1', /IPv4-mapped form of 127\.0\.0\.1, a loopback/],
    ['::ffff:a9fe:a9fe', /IPv4-mapped form of 169\.254\.169\.254, a cloud metadata/],
    ['0:0:0:0:0:ffff:10.1.2.3', /IPv4-mapped form of 10\.1\.2\.3, a private/],
    ['::127.0.0.1', /IPv4-compatible/],
    ['::8.8.8.8', /IPv4-compatible/],
    ['::ffff:0:7f00:1', /IPv4-translated/],
    ['64:ff9b::127.0.0.1', /NAT64 form of 127\.0\.0\.1, a loopback/],
    ['64:ff9b::a9fe:a9fe', /NAT64 form of 169\.254\.169\.254/],
    ['64:ff9b:1::808:808', /local-use NAT64/],
    ['2002:7f00:1::1', /6to4 form of 127\.0\.0\.1, a loopback/],
    ['2002:c0a8:101::1', /6to4 form of 192\.168\.1\.1, a private/],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', /Teredo/],
    ['2001:db8::1', /documentation/],
    ['3fff::1', /documentation/],
    ['100::1', /discard-only/],
    ['4000::1', /not a global unicast/],
    ['localhost', /not an IP address/],
    ['0177.0.0.1', /not an IP address/],
    ['2130706433', /not an IP address/],
    ['', /not an IP address/],
  ];
  test.each(REFUSED)('refuses %s', (address, reason) => {
    const why = policy.refusal(address);
    expect(why).toMatch(reason);
    expect(why!.startsWith(`${address} is `)).toBe(true);
  });

  const ALLOWED = [
    '8.8.8.8', '1.1.1.1', '93.184.215.14', '172.15.255.255', '172.32.0.0', '100.63.255.255', '100.128.0.0',
    '169.253.255.255', '192.167.255.255', '223.255.255.255',
    '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '[2606:4700:4700::1111]',
    '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '2002:808:808::1',
  ];
  test.each(ALLOWED)('allows %s', (address) => {
    expect(policy.refusal(address)).toBeNull();
  });
});

describe('resolveSafeTarget: every spelling of a refused host ends refused', () => {
  // The WHATWG parser normalizes many spellings to dotted decimal or compressed IPv6 before the
  // guard sees them; the assertion is on the outcome, whichever layer decides.
  const REFUSED_URLS: Array<[string, RegExp]> = [
    ['https://127.0.0.1/hook', /^host 127\.0\.0\.1 is a loopback address$/],
    ['https://2130706433/hook', /127\.0\.0\.1 is a loopback/],
    ['https://0x7f000001/hook', /127\.0\.0\.1 is a loopback/],
    ['https://0x7f.0x0.0x0.0x1/hook', /127\.0\.0\.1 is a loopback/],
    ['https://0177.0.0.1/hook', /127\.0\.0\.1 is a loopback/],
    ['https://017700000001/hook', /127\.0\.0\.1 is a loopback/],
    ['https://127.1/hook', /127\.0\.0\.1 is a loopback/],
    ['https://127.0.1/hook', /127\.0\.0\.1 is a loopback/],
    ['https://127.0.0.1./hook', /127\.0\.0\.1 is a loopback/],
    ['https://%31%32%37.0.0.1/hook', /127\.0\.0\.1 is a loopback/],
    ['https://１２７.０.０.１/hook', /127\.0\.0\.1 is a loopback/],
    ['https://0/hook', /0\.0\.0\.0 is an unspecified/],
    ['https://0.0.0.0:8443/hook', /unspecified/],
    ['https://[::1]/hook', /::1 is a loopback/],
    ['https://[0:0:0:0:0:0:0:1]/hook', /::1 is a loopback/],
    ['https://[::]/hook', /unspecified/],
    ['https://[::ffff:127.0.0.1]/hook', /IPv4-mapped form of 127\.0\.0\.1/],
    ['https://[::ffff:7f00:1]/hook', /IPv4-mapped form of 127\.0\.0\.1/],
    ['https://[0:0:0:0:0:ffff:169.254.169.254]/latest', /169\.254\.169\.254, a cloud metadata/],
    ['https://[::127.0.0.1]/hook', /IPv4-compatible/],
    ['https://[64:ff9b::10.0.0.1]/hook', /NAT64 form of 10\.0\.0\.1/],
    ['https://[fe80::1]/hook', /link-local/],
    ['https://[FD00:EC2::254]/latest', /cloud metadata/],
    ['https://169.254.169.254/latest/meta-data', /cloud metadata/],
    ['https://0xa9fea9fe/latest', /169\.254\.169\.254 is a cloud metadata/],
    ['https://100.100.100.200/latest', /cloud metadata/],
    ['https://10.1.2.3/hook', /private/],
    ['https://192.168.0.1:443/hook', /private/],
    ['https://100.64.1.1/hook', /carrier-grade NAT/],
    ['https://224.0.0.1/hook', /multicast/],
    ['https://255.255.255.255/hook', /broadcast/],
    ['https://localhost/hook', /^host localhost is a loopback name$/],
    ['https://LOCALHOST:8443/hook', /localhost is a loopback name/],
    ['https://localhost./hook', /localhost is a loopback name/],
    ['https://localhost../hook', /localhost is a loopback name/],
    ['https://%6c%6f%63%61%6c%68%6f%73%74/hook', /localhost is a loopback name/],
    ['https://api.LocalHost/hook', /api\.localhost is a loopback name/],
    ['http://example.com/hook', /^must use https \(got http:\)$/],
    ['ftp://example.com/hook', /must use https/],
    ['file:///etc/passwd', /must use https/],
    ['https://user:pw@example.com/hook', /must not contain credentials/],
    ['https://user@example.com/hook', /must not contain credentials/],
    ['example.com/hook', /not a valid absolute URL/],
    ['https://', /not a valid absolute URL/],
    ['https://exa mple.com/', /not a valid absolute URL/],
    ['', /not a valid absolute URL/],
  ];
  test.each(REFUSED_URLS)('refuses %s', async (url, reason) => {
    const dns = fakeDns({});
    expect(await verdict(url, dns)).toMatch(reason);
    // Literals and names refused by name never reach DNS.
    expect(dns.asked).toEqual([]);
  });

  test('a public IP literal is accepted as the one address to connect to, without a lookup', async () => {
    const dns = fakeDns({});
    const target = await resolveSafeTarget('https://8.8.8.8:8443/hook?x=1', policy, dns);
    expect(target.url.href).toBe('https://8.8.8.8:8443/hook?x=1');
    expect(target.addresses).toEqual([{ address: '8.8.8.8', family: 4 }]);
    const v6 = await resolveSafeTarget('https://[2606:4700:4700::1111]/', policy, dns);
    expect(v6.addresses).toEqual([{ address: '2606:4700:4700::1111', family: 6 }]);
    expect(dns.asked).toEqual([]);
  });
});

describe('resolveSafeTarget: names are judged by every address they resolve to', () => {
  const dns = fakeDns({
    'hooks.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'mixed.example.com': ['93.184.215.14', '10.0.0.5'],
    'mixed-v6.example.com': ['2606:4700::1', 'fd00::5'],
    'aaaa-only.example.com': ['fd12::1'],
    'metadata.example.com': ['169.254.169.254'],
    'mapped.example.com': ['::ffff:192.168.0.1'],
    'scoped.example.com': ['fe80::1%eth0'],
    'empty.example.com': [],
    'loop.example.com': ['127.0.0.1'],
  });

  test('a name with only public addresses resolves to all of them, for the deliverer to connect to', async () => {
    const target = await resolveSafeTarget('https://Hooks.Example.com./in', policy, dns);
    expect(dns.asked).toContain('hooks.example.com');
    expect(target.url.hostname).toBe('hooks.example.com.');
    expect(target.addresses).toEqual([
      { address: '93.184.215.14', family: 4 },
      { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
    ]);
  });

  test.each([
    ['mixed.example.com', /^host mixed\.example\.com resolves to a refused address: 10\.0\.0\.5 is a private address$/],
    ['mixed-v6.example.com', /fd00::5 is a unique-local address/],
    ['aaaa-only.example.com', /fd12::1 is a unique-local address/],
    ['metadata.example.com', /169\.254\.169\.254 is a cloud metadata address/],
    ['mapped.example.com', /IPv4-mapped form of 192\.168\.0\.1, a private address/],
    ['scoped.example.com', /fe80::1%eth0 is a link-local address/],
    ['loop.example.com', /127\.0\.0\.1 is a loopback address/],
  ])('refuses %s when any of its addresses is refused', async (name, reason) => {
    const why = await verdict(`https://${name}/hook`, dns);
    expect(why).toMatch(reason);
  });

  test('a name that does not resolve, or resolves to nothing, is refused as unresolved', async () => {
    await expect(resolveSafeTarget('https://nowhere.example.com/', policy, dns)).rejects.toMatchObject({
      message: 'host nowhere.example.com could not be resolved (ENOTFOUND)', kind: 'unresolved',
    });
    await expect(resolveSafeTarget('https://empty.example.com/', policy, dns)).rejects.toMatchObject({
      message: 'host empty.example.com resolves to no address', kind: 'unresolved',
    });
  });

  test('a lookup that never answers is cut off and refused', async () => {
    jest.useFakeTimers();
    try {
      const pending = resolveSafeTarget('https://slow.example.com/', policy, () => new Promise(() => {}));
      const settled = expect(pending).rejects.toMatchObject({ kind: 'unresolved', message: /slow\.example\.com could not be resolved \(ETIMEOUT\)/ });
      await jest.advanceTimersByTimeAsync(5000);
      await settled;
    } finally {
      jest.useRealTimers();
    }
  });

  test('without an injected lookup the system resolver answers (.invalid never resolves, RFC 6761)', async () => {
    await expect(resolveSafeTarget('https://nonexistent.invalid/', policy)).rejects.toMatchObject({
      kind: 'unresolved', message: /^host nonexistent\.invalid could not be resolved \(\w+\)$/,
    });
  });
});

describe('the unsafe allow-list opens exactly what it lists', () => {
  test('a single address opens that address only, in its own family', () => {
    const open = new AddressPolicy(['127.0.0.1']);
    expect(open.unsafe).toBe(true);
    expect(open.refusal('127.0.0.1')).toBeNull();
    expect(open.refusal('127.0.0.2')).toMatch(/loopback/);
    expect(open.refusal('::1')).toMatch(/loopback/);
    expect(open.refusal('::ffff:127.0.0.1')).toMatch(/IPv4-mapped/);
    expect(open.refusal('10.0.0.1')).toMatch(/private/);
    expect(policy.unsafe).toBe(false);
  });

  test('a CIDR opens its range and nothing beyond it', () => {
    const open = new AddressPolicy(['10.1.2.0/24', '::1/128']);
    expect(open.refusal('10.1.2.0')).toBeNull();
    expect(open.refusal('10.1.2.255')).toBeNull();
    expect(open.refusal('10.1.3.0')).toMatch(/private/);
    expect(open.refusal('10.1.1.255')).toMatch(/private/);
    expect(open.refusal('::1')).toBeNull();
    expect(open.refusal('::2')).toMatch(/IPv4-compatible/);
  });

  test('URLs on opened addresses pass; localhost names stay refused', async () => {
    const open = new AddressPolicy(['127.0.0.1/32']);
    expect(await verdict('https://127.0.0.1:8443/hook', NO_DNS, open)).toBeNull();
    expect(await verdict('https://0x7f000001:8443/hook', NO_DNS, open)).toBeNull();
    expect(await verdict('https://127.0.0.2:8443/hook', NO_DNS, open)).toMatch(/loopback/);
    expect(await verdict('https://localhost:8443/hook', NO_DNS, open)).toMatch(/loopback name/);
    expect(await verdict('http://127.0.0.1:8443/hook', NO_DNS, open)).toMatch(/must use https/);
  });

  test.each(['localhost', '127.0.0.1/33', '10.0.0.0/8/8', '::1/129', '1.2.3', '10.0.0.0/x', ''])(
    'refuses the entry %j at construction', (entry) => {
      expect(() => new AddressPolicy([entry])).toThrow(/XFER_UNSAFE_WEBHOOK_ALLOW/);
    },
  );
});
