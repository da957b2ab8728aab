import { base32Decode, base32Encode, generateTotp, generateTotpSecret, hotp, otpauthUrl, timeStep, verifyTotp } from './totp.js';

// RFC 6238 Appendix B: the SHA-1 seed and its 8-digit codes.
const RFC_SEED = Buffer.from('12345678901234567890', 'ascii');
const RFC_VECTORS: Array<[seconds: number, code: string]> = [
  [59, '94287082'],
  [1111111109, '07081804'],
  [1111111111, '14050471'],
  [1234567890, '89005924'],
  [2000000000, '69279037'],
];

describe('generateTotp', () => {
  test.each(RFC_VECTORS)('matches RFC 6238 at T=%i s (SHA-1, 8 digits)', (seconds, code) => {
    expect(generateTotp(RFC_SEED, seconds * 1000, { digits: 8 })).toBe(code);
  });

  test('6 digits are the last 6 of the same truncated value (RFC 4226 test vector, counter 1)', () => {
    expect(generateTotp(RFC_SEED, 59_000)).toBe('287082');
    expect(hotp(RFC_SEED, 1)).toBe('287082');
    expect(hotp(RFC_SEED, 0)).toBe('755224');
  });

  test('refuses digits outside 6..10', () => {
    expect(() => hotp(RFC_SEED, 1, 5)).toThrow(RangeError);
    expect(() => hotp(RFC_SEED, 1, 11)).toThrow(RangeError);
  });
});

describe('verifyTotp', () => {
  const at = 1111111111 * 1000;
  const step = timeStep(at);

  test('answers the matched step for the current code and for one step either side', () => {
    expect(verifyTotp(RFC_SEED, hotp(RFC_SEED, step), at)).toBe(step);
    expect(verifyTotp(RFC_SEED, hotp(RFC_SEED, step - 1), at)).toBe(step - 1);
    expect(verifyTotp(RFC_SEED, hotp(RFC_SEED, step + 1), at)).toBe(step + 1);
  });

  test('refuses codes two steps away, wrong codes and malformed input', () => {
    expect(verifyTotp(RFC_SEED, hotp(RFC_SEED, step - 2), at)).toBeNull();
    expect(verifyTotp(RFC_SEED, hotp(RFC_SEED, step + 2), at)).toBeNull();
    const right = hotp(RFC_SEED, step);
    const wrong = String((Number(right) + 1) % 1_000_000).padStart(6, '0');
    expect(verifyTotp(RFC_SEED, wrong, at)).toBeNull();
    for (const bad of ['', '12345', '1234567', '12345a', ' 12345', '１２３４５６']) expect(verifyTotp(RFC_SEED, bad, at)).toBeNull();
  });

  test('honours digits and window', () => {
    expect(verifyTotp(RFC_SEED, '14050471', at, { digits: 8 })).toBe(step);
    expect(verifyTotp(RFC_SEED, hotp(RFC_SEED, step - 1), at, { window: 0 })).toBeNull();
    expect(verifyTotp(RFC_SEED, hotp(RFC_SEED, step - 2), at, { window: 2 })).toBe(step - 2);
  });
});

describe('base32', () => {
  test.each([
    ['', ''], ['f', 'MY'], ['fo', 'MZXQ'], ['foo', 'MZXW6'], ['foob', 'MZXW6YQ'], ['fooba', 'MZXW6YTB'], ['foobar', 'MZXW6YTBOI'],
  ])('RFC 4648 vector %j ↔ %j', (plain, encoded) => {
    expect(base32Encode(Buffer.from(plain))).toBe(encoded);
    expect(base32Decode(encoded).toString()).toBe(plain);
  });

  test('decodes lower case, grouping and padding; refuses other characters', () => {
    expect(base32Decode('mzxw 6ytb-oi======').toString()).toBe('foobar');
    expect(() => base32Decode('MZXW1')).toThrow(RangeError);
  });

  test('round-trips a generated 20-byte secret as 32 characters', () => {
    const secret = generateTotpSecret();
    expect(secret).toHaveLength(20);
    const text = base32Encode(secret);
    expect(text).toMatch(/^[A-Z2-7]{32}$/);
    expect(base32Decode(text).equals(secret)).toBe(true);
  });
});

test('otpauthUrl names issuer, account and parameters', () => {
  expect(otpauthUrl({ issuer: 'xfer', account: 'ann+mfa@example.test', secret: Buffer.from('foobar') })).toBe(
    'otpauth://totp/xfer:ann%2Bmfa@example.test?secret=MZXW6YTBOI&issuer=xfer&algorithm=SHA1&digits=6&period=30',
  );
});
