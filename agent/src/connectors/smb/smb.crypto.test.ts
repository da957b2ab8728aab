import { createHmac } from 'node:crypto';
import { aesCmac, md4, smb3Kdf } from './smb.crypto.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('md4 (RFC 1320 test suite)', () => {
  it.each([
    ['', '31d6cfe0d16ae931b73c59d7e0c089c0'],
    ['a', 'bde52cb31de33e46245e05fbdbd6fb24'],
    ['abc', 'a448017aaf21d8525fc10ae87aa6729d'],
    ['message digest', 'd9130a8164549fe818874806e1c7014b'],
    ['abcdefghijklmnopqrstuvwxyz', 'd79e1c308aa5bbcdeea8ed63df412da9'],
    ['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789', '043f8582f241db351ce627e153e7f0e4'],
    ['1234567890'.repeat(8), 'e33b4ddc9c38f2199c3e7b164fcc0536'],
  ])('md4(%j)', (input, digest) => {
    expect(md4(Buffer.from(input, 'latin1')).toString('hex')).toBe(digest);
  });

  it('pads correctly around the 56-byte boundary', () => {
    // Known NT hash of "Password" (MS-NLMP 4.2.2.1.2) is MD4 of its UTF-16LE form: 16 bytes.
    expect(md4(Buffer.from('Password', 'utf16le')).toString('hex')).toBe('a4f49c406510bdcab6824ee7c30fd852');
    // 55, 56 and 64 bytes take one, two and two blocks: the lengths all differ in the digest.
    const digests = [55, 56, 63, 64, 65].map((n) => md4(Buffer.alloc(n, 0x61)).toString('hex'));
    expect(new Set(digests).size).toBe(5);
  });
});

describe('aesCmac (RFC 4493 examples)', () => {
  const key = hex('2b7e1516 28aed2a6 abf71588 09cf4f3c');
  const message = hex(`6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51
    30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710`);
  it.each([
    [0, 'bb1d6929 e9593728 7fa37d12 9b756746'],
    [16, '070a16b4 6b4d4144 f79bdd9d d04a287c'],
    [40, 'dfa66747 de9ae630 30ca3261 1497c827'],
    [64, '51f0bebf 7e3b9d92 fc497417 79363cfe'],
  ])('over the first %d bytes', (length, mac) => {
    expect(aesCmac(key, message.subarray(0, length)).toString('hex')).toBe(hex(mac).toString('hex'));
  });

  it('gives the same MAC over parts as over the whole', () => {
    expect(aesCmac(key, message.subarray(0, 10), message.subarray(10, 40)).equals(aesCmac(key, message.subarray(0, 40)))).toBe(true);
  });
});

describe('smb3Kdf (SP800-108 counter mode, MS-SMB2 3.1.4.2)', () => {
  it('is HMAC-SHA256 over i || label || 0x00 || context || L, cut to 128 bits', () => {
    const key = hex('000102030405060708090a0b0c0d0e0f');
    const input = Buffer.concat([hex('00000001'), Buffer.from('SMB2AESCMAC\0'), hex('00'), Buffer.from('SmbSign\0'), hex('00000080')]);
    const expected = createHmac('sha256', key).update(input).digest().subarray(0, 16);
    expect(smb3Kdf(key, 'SMB2AESCMAC', 'SmbSign').equals(expected)).toBe(true);
    expect(smb3Kdf(key, 'SMB2AESCMAC', 'SmbSign').equals(smb3Kdf(key, 'SMB2APP', 'SmbRpc'))).toBe(false);
  });
});
