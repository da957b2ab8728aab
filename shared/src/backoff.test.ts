import { Backoff, backoffDelayMs } from './backoff.js';

describe('backoff', () => {
  test('the ceiling doubles per attempt up to the cap; the delay is a uniform fraction of it (full jitter)', () => {
    expect([0, 1, 2, 3, 10].map((n) => backoffDelayMs(n, 500, 30_000, () => 0.999999))).toEqual([499, 999, 1999, 3999, 29_999]);
    expect(backoffDelayMs(5, 500, 30_000, () => 0)).toBe(0);
    expect(backoffDelayMs(2, 500, 30_000, () => 0.5)).toBe(1000);
  });

  test('reset starts again from the first ceiling', () => {
    const b = new Backoff(100, 10_000, () => 0.999999);
    expect([b.next(), b.next(), b.next()]).toEqual([99, 199, 399]);
    b.reset();
    expect(b.next()).toBe(99);
  });

  test('a huge attempt number does not overflow past the cap', () => {
    expect(backoffDelayMs(5000, 500, 30_000, () => 0.999999)).toBe(29_999);
  });
});
