import { createHash, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * base64url of `bytes` random bytes, never starting with `-`: a share link's or an invite's
 * token is typed as an argument (`xfer shares download <token>`), where a leading dash reads as
 * an option (1 token in 64 failed so). Drawing again costs under 0.03 bits of the 256.
 */
export function randomToken(bytes = 32): string {
  for (;;) {
    const token = randomBytes(bytes).toString('base64url');
    if (!token.startsWith('-')) return token;
  }
}

export function sha256Hex(value: string | Buffer): string {
  return createHash('sha256').update(value).digest('hex');
}

/** Constant-time equality of two strings (false, without early exit, when lengths differ). */
export function safeEqual(a: string, b: string): boolean {
  const ba = Buffer.from(a);
  const bb = Buffer.from(b);
  if (ba.length !== bb.length) {
    timingSafeEqual(ba, ba);
    return false;
  }
  return timingSafeEqual(ba, bb);
}

// scrypt with N=2^15, r=8: 32 MiB per hash, about 50-100 ms here: memory-hard per decisions.md.
const SCRYPT = { N: 1 << 15, r: 8, p: 1, keyLen: 32 };

function scryptAsync(password: string, salt: Buffer, keyLen: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, keyLen, options, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** `scrypt$N$r$p$salt$hash`, salt and hash base64url. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const { N, r, p, keyLen } = SCRYPT;
  const hash = await scryptAsync(password, salt, keyLen, { N, r, p, maxmem: 128 * N * r * 2 });
  return ['scrypt', N, r, p, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

// A valid hash of a random password: verifying against it costs the same as a real check, so a
// login for an unknown email takes as long as one for a known email.
let dummyHash: Promise<string> | undefined;

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const encoded = stored ?? (await (dummyHash ??= hashPassword(randomToken())));
  const [alg, n, r, p, salt, hash] = encoded.split('$');
  if (alg !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const N = Number(n);
  const actual = await scryptAsync(password, Buffer.from(salt, 'base64url'), expected.length, {
    N, r: Number(r), p: Number(p), maxmem: 128 * N * Number(r) * 2,
  });
  return timingSafeEqual(actual, expected) && stored !== null;
}
