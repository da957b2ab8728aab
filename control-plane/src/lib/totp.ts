import { createHmac, randomBytes } from 'node:crypto';
import { safeEqual } from './crypto.js';

/**
 * Time-based one-time passwords (RFC 6238 over RFC 4226 HOTP) with HMAC-SHA1, the algorithm
 * every authenticator app supports, and base32 (RFC 4648) for the secrets users type or scan.
 */

/** Parameters of a TOTP: what the otpauth URL announces must match what `verifyTotp` checks. */
export interface TotpOptions {
  /** Length of a code: 6 (the default, what apps show) to 10. */
  digits?: number;
  /** Length of one time step. */
  periodSeconds?: number;
  /** Steps accepted on either side of the current one, for clock drift and typing time. */
  window?: number;
}

export const TOTP_DEFAULTS = { digits: 6, periodSeconds: 30, window: 1 } as const;

const withDefaults = (options: TotpOptions): Required<TotpOptions> => ({
  digits: options.digits ?? TOTP_DEFAULTS.digits,
  periodSeconds: options.periodSeconds ?? TOTP_DEFAULTS.periodSeconds,
  window: options.window ?? TOTP_DEFAULTS.window,
});

/** Size of a generated secret: 160 bits, the HMAC-SHA1 output size RFC 4226 recommends. */
export const TOTP_SECRET_BYTES = 20;

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 without padding (authenticator apps neither need nor want the `=`). */
export function base32Encode(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = ((buffer << 8) | byte) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(buffer << (5 - bits)) & 31];
  return out;
}

/**
 * Decodes base32 as people copy it: any case, spaces and hyphens between groups, optional `=`
 * padding. Throws a RangeError on any other character.
 */
export function base32Decode(text: string): Buffer {
  const clean = text.replace(/[\s-]/g, '').replace(/=+$/, '').toUpperCase();
  const out: number[] = [];
  let buffer = 0;
  let bits = 0;
  for (const char of clean) {
    const value = BASE32.indexOf(char);
    if (value < 0) throw new RangeError(`'${char}' is not a base32 character`);
    buffer = ((buffer << 5) | value) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      out.push((buffer >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** A new random secret of `TOTP_SECRET_BYTES` bytes. */
export function generateTotpSecret(): Buffer {
  return randomBytes(TOTP_SECRET_BYTES);
}

/** The time step (RFC 6238 "T") that the instant `atMs` falls in. */
export function timeStep(atMs: number, periodSeconds: number = TOTP_DEFAULTS.periodSeconds): number {
  return Math.floor(atMs / 1000 / periodSeconds);
}

/** RFC 4226 HOTP: the `digits`-digit code of `counter`, zero-padded. */
export function hotp(secret: Uint8Array, counter: number, digits: number = TOTP_DEFAULTS.digits): string {
  if (!Number.isInteger(digits) || digits < 6 || digits > 10) throw new RangeError('digits must be an integer from 6 to 10');
  if (!Number.isSafeInteger(counter) || counter < 0) throw new RangeError('counter must be a non-negative safe integer');
  const message = Buffer.alloc(8);
  message.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac('sha1', secret).update(message).digest();
  // Dynamic truncation (RFC 4226 §5.3): 31 bits from the offset named by the last nibble.
  const offset = mac[mac.length - 1]! & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** digits).padStart(digits, '0');
}

/** The code of the time step that `atMs` falls in. */
export function generateTotp(secret: Uint8Array, atMs: number, options: TotpOptions = {}): string {
  const { digits, periodSeconds } = withDefaults(options);
  return hotp(secret, timeStep(atMs, periodSeconds), digits);
}

/**
 * Checks `code` against the steps around `atMs` and answers the step it matched, or null.
 * The caller stores the step and refuses steps up to it next time (RFC 6238 §5.2: a code is
 * accepted once). Every candidate is compared in constant time and none is skipped, so the
 * answer's timing says nothing about how close a guess was or which step it matched.
 */
export function verifyTotp(secret: Uint8Array, code: string, atMs: number, options: TotpOptions = {}): number | null {
  const { digits, periodSeconds, window } = withDefaults(options);
  if (code.length !== digits || !/^[0-9]+$/.test(code)) return null;
  const current = timeStep(atMs, periodSeconds);
  let matched: number | null = null;
  for (let step = current - window; step <= current + window; step++) {
    if (step < 0) continue;
    // Later steps win: a code valid for two steps (a 1-in-10^digits collision) burns the later one.
    if (safeEqual(hotp(secret, step, digits), code)) matched = step;
  }
  return matched;
}

/**
 * The Key URI (`otpauth://totp/…`) that authenticator apps scan as a QR code. The label is
 * `issuer:account`; `@` stays as is (legal in a URI path, and what the apps' own examples show).
 */
export function otpauthUrl(input: { issuer: string; account: string; secret: Uint8Array } & Omit<TotpOptions, 'window'>): string {
  const { digits, periodSeconds } = withDefaults(input);
  const encode = (text: string) => encodeURIComponent(text).replace(/%40/g, '@');
  const query = [
    `secret=${base32Encode(input.secret)}`,
    `issuer=${encodeURIComponent(input.issuer)}`,
    'algorithm=SHA1',
    `digits=${digits}`,
    `period=${periodSeconds}`,
  ].join('&');
  return `otpauth://totp/${encode(input.issuer)}:${encode(input.account)}?${query}`;
}
