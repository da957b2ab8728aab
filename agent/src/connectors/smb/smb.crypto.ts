import { createCipheriv, createHmac } from 'node:crypto';

/** AES-128-GMAC (GCM over no plaintext), SMB 3.1.1's cheaper signature: the tag over `aad`. */
export function aesGmac(key: Buffer, nonce: Buffer, aad: Buffer): Buffer {
  const gcm = createCipheriv('aes-128-gcm', key, nonce);
  gcm.setAAD(aad);
  gcm.final();
  return gcm.getAuthTag();
}

/**
 * MD4 (RFC 1320), for the NT hash of NTLM. Node 20's OpenSSL 3 has MD4 only in its legacy
 * provider (off by default, `--openssl-legacy-provider` is a process-wide switch), so it is
 * written out here; it hashes passwords only, never file data.
 */
export function md4(data: Buffer): Buffer {
  const bitLength = data.length * 8;
  const padded = Buffer.alloc(((data.length + 8) >> 6 << 6) + 64);
  data.copy(padded);
  padded[data.length] = 0x80;
  padded.writeUInt32LE(bitLength >>> 0, padded.length - 8);
  padded.writeUInt32LE(Math.floor(bitLength / 2 ** 32), padded.length - 4);
  let a = 0x67452301;
  let b = 0xefcdab89;
  let c = 0x98badcfe;
  let d = 0x10325476;
  const x = new Array<number>(16);
  const rotl = (v: number, s: number) => (v << s) | (v >>> (32 - s));
  const f = (p: number, q: number, r: number) => (p & q) | (~p & r);
  const g = (p: number, q: number, r: number) => (p & q) | (p & r) | (q & r);
  const h = (p: number, q: number, r: number) => p ^ q ^ r;
  for (let block = 0; block < padded.length; block += 64) {
    for (let i = 0; i < 16; i++) x[i] = padded.readUInt32LE(block + i * 4);
    const [aa, bb, cc, dd] = [a, b, c, d];
    for (const i of [0, 4, 8, 12]) {
      a = rotl((a + f(b, c, d) + x[i]!) | 0, 3);
      d = rotl((d + f(a, b, c) + x[i + 1]!) | 0, 7);
      c = rotl((c + f(d, a, b) + x[i + 2]!) | 0, 11);
      b = rotl((b + f(c, d, a) + x[i + 3]!) | 0, 19);
    }
    for (const i of [0, 1, 2, 3]) {
      a = rotl((a + g(b, c, d) + x[i]! + 0x5a827999) | 0, 3);
      d = rotl((d + g(a, b, c) + x[i + 4]! + 0x5a827999) | 0, 5);
      c = rotl((c + g(d, a, b) + x[i + 8]! + 0x5a827999) | 0, 9);
      b = rotl((b + g(c, d, a) + x[i + 12]! + 0x5a827999) | 0, 13);
    }
    for (const i of [0, 2, 1, 3]) {
      a = rotl((a + h(b, c, d) + x[i]! + 0x6ed9eba1) | 0, 3);
      d = rotl((d + h(a, b, c) + x[i + 8]! + 0x6ed9eba1) | 0, 9);
      c = rotl((c + h(d, a, b) + x[i + 4]! + 0x6ed9eba1) | 0, 11);
      b = rotl((b + h(c, d, a) + x[i + 12]! + 0x6ed9eba1) | 0, 15);
    }
    a = (a + aa) | 0;
    b = (b + bb) | 0;
    c = (c + cc) | 0;
    d = (d + dd) | 0;
  }
  const out = Buffer.alloc(16);
  [a, b, c, d].forEach((v, i) => out.writeInt32LE(v, i * 4));
  return out;
}

export function hmacMd5(key: Buffer, ...data: Buffer[]): Buffer {
  const mac = createHmac('md5', key);
  for (const part of data) mac.update(part);
  return mac.digest();
}

/** One doubling in GF(2^128), RFC 4493's subkey step. */
function double(block: Buffer): Buffer {
  const out = Buffer.alloc(16);
  for (let i = 0; i < 16; i++) out[i] = ((block[i]! << 1) | (i < 15 ? block[i + 1]! >> 7 : 0)) & 0xff;
  if (block[0]! & 0x80) out[15]! ^= 0x87;
  return out;
}

/**
 * AES-128-CMAC (RFC 4493), SMB 3.0.x's signature. Node has no CMAC; the whole message goes through
 * one aes-128-cbc pass with a zero IV (a CBC-MAC) after the last block was masked with K1 or K2,
 * so a 1 MiB write costs one cipher call, not 65,536.
 */
export function aesCmac(key: Buffer, ...parts: Buffer[]): Buffer {
  const message = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  const l = createCipheriv('aes-128-ecb', key, null).setAutoPadding(false).update(Buffer.alloc(16));
  const k1 = double(l);
  const complete = message.length > 0 && message.length % 16 === 0;
  const blocks = Math.max(1, Math.ceil(message.length / 16));
  const lastStart = (blocks - 1) * 16;
  const last = Buffer.alloc(16);
  message.copy(last, 0, lastStart);
  if (!complete) last[message.length - lastStart] = 0x80;
  const mask = complete ? k1 : double(k1);
  for (let i = 0; i < 16; i++) last[i]! ^= mask[i]!;
  const cbc = createCipheriv('aes-128-cbc', key, Buffer.alloc(16)).setAutoPadding(false);
  if (lastStart > 0) cbc.update(message.subarray(0, lastStart));
  return cbc.update(last);
}

/**
 * SP800-108 counter-mode KDF with HMAC-SHA256, one 128-bit block, as MS-SMB2 3.1.4.2 derives
 * SMB 3.x keys: `label` includes its terminating NUL, so does `context` when a string (3.0.x);
 * 3.1.1's context is the pre-authentication hash, as bytes.
 */
export function smb3Kdf(key: Buffer, label: string, context: string | Buffer): Buffer {
  const counter = Buffer.from([0, 0, 0, 1]);
  const length = Buffer.from([0, 0, 0, 128]);
  return createHmac('sha256', key)
    .update(counter)
    .update(Buffer.from(`${label}\0`, 'latin1'))
    .update(Buffer.from([0]))
    .update(typeof context === 'string' ? Buffer.from(`${context}\0`, 'latin1') : context)
    .update(length)
    .digest()
    .subarray(0, 16);
}
