import { randomToken } from './crypto.js';

describe('randomToken', () => {
  test('base64url of the bytes asked for, and never a leading dash (it would read as a CLI option)', () => {
    // Without the redraw, 1 token in 64 starts with '-': among 20,000 that is all but certain.
    const tokens = Array.from({ length: 20_000 }, () => randomToken(32));
    expect(tokens.filter((t) => !/^[A-Za-z0-9_-]{43}$/.test(t))).toEqual([]);
    expect(tokens.filter((t) => t.startsWith('-'))).toEqual([]);
    // Still random: every other character of the alphabet comes first somewhere, '-' inside.
    expect(new Set(tokens.map((t) => t[0])).size).toBe(63);
    expect(tokens.some((t) => t.includes('-'))).toBe(true);
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(randomToken(16)).toMatch(/^[A-Za-z0-9_][A-Za-z0-9_-]{21}$/);
  });
});
