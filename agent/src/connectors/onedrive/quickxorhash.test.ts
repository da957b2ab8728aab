import { randomBytes } from 'node:crypto';
import { QuickXorHash } from './quickxorhash.js';

describe('QuickXorHash', () => {
  it('matches the published vector of "hello world"', () => {
    // From the quickxorhash crate's documentation, which follows Microsoft's reference sample.
    const expected = Buffer.from([104, 40, 3, 27, 216, 240, 6, 16, 220, 225, 13, 114, 107, 3, 25, 0, 0, 0, 0, 0]);
    expect(new QuickXorHash().update(Buffer.from('hello world')).digest()).toEqual(expected);
  });

  it('hashes no bytes to twenty zero bytes (the length, 0, is all that is xored in)', () => {
    expect(new QuickXorHash().digestBase64()).toBe(Buffer.alloc(20).toString('base64'));
  });

  it('gives the same digest however the input is cut into updates', () => {
    const data = randomBytes(100_003);
    const whole = new QuickXorHash().update(data).digestBase64();
    for (const step of [1, 7, 159, 160, 161, 4096]) {
      const hash = new QuickXorHash();
      for (let i = 0; i < data.length; i += step) hash.update(data.subarray(i, i + step));
      expect(hash.digestBase64()).toBe(whole);
    }
  });

  it('puts the length in the last 8 bytes: one zero byte differs from none', () => {
    const digest = new QuickXorHash().update(Buffer.from([0])).digest();
    expect([...digest.subarray(0, 12)]).toEqual(new Array(12).fill(0));
    expect(digest.readBigUInt64LE(12)).toBe(1n);
  });
});
