import { inRange, parseCidr, parseIp, rangeWithin, specialPurpose, unwrapV4, v4Text } from './ip-ranges.js';

const kind = (address: string) => specialPurpose(parseIp(address)!)?.kind ?? null;

describe('ip-ranges (shared by the webhook guard and the agent network guard)', () => {
  test('every special-purpose range has the kind the rules build on', () => {
    expect(['169.254.169.254', '169.254.170.2', '100.100.100.200', 'fd00:ec2::254', '::ffff:169.254.169.254', '64:ff9b::a9fe:a9fe'].map(kind)).toEqual(Array(6).fill('metadata'));
    expect(['169.254.1.1', 'fe80::1', '::ffff:169.254.9.9'].map(kind)).toEqual(Array(3).fill('link-local'));
    expect(['127.0.0.1', '127.255.0.1', '::1', '::ffff:127.0.0.1'].map(kind)).toEqual(Array(4).fill('loopback'));
    expect(['10.0.0.1', '172.31.255.255', '192.168.0.1', '100.64.0.1', 'fd12::1'].map(kind)).toEqual(Array(5).fill('private'));
    expect(['0.0.0.0', '224.0.0.1', '2001:db8::1', 'fec0::1', '::'].map(kind)).toEqual(Array(5).fill('other'));
    expect(['8.8.8.8', '2606:4700::1111', '100.100.100.201'].map(kind)).toEqual([null, null, 'private']);
  });

  test('the reason names the embedded IPv4 address', () => {
    expect(specialPurpose(parseIp('::ffff:10.1.2.3')!)).toEqual({ kind: 'private', why: 'an IPv4-mapped form of 10.1.2.3, a private address' });
    expect(v4Text(unwrapV4(parseIp('2002:a9fe:a9fe::1')!).bytes)).toBe('169.254.169.254');
  });

  test('parsing refuses what is not a canonical address or range', () => {
    for (const bad of ['127.1', '0x7f000001', '1.2.3.4.5', 'host', '10.0.0.0/33', '::/129', '10.0.0.0/8/1', '10.0.0.0/x']) expect(parseCidr(bad)).toBeNull();
    expect(parseCidr('10.0.0.0/8')).toMatchObject({ family: 4, prefix: 8 });
    expect(parseCidr('::1')).toMatchObject({ family: 6, prefix: 128 });
  });

  test('inRange and rangeWithin', () => {
    const net10 = parseCidr('10.0.0.0/8')!;
    expect(inRange(parseIp('10.200.1.1')!, net10)).toBe(true);
    expect(inRange(parseIp('11.0.0.1')!, net10)).toBe(false);
    expect(inRange(parseIp('::ffff:10.0.0.1')!, net10)).toBe(false);
    expect(rangeWithin(parseCidr('10.1.0.0/16')!, net10)).toBe(true);
    expect(rangeWithin(parseCidr('0.0.0.0/0')!, net10)).toBe(false);
    expect(rangeWithin(parseCidr('169.254.169.254')!, parseCidr('169.254.169.254/32')!)).toBe(true);
  });
});
