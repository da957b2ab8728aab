import type { Entry } from '../types.js';

/** A blob's or file's Content-MD5 property as a checksum (absent when the writer set none). */
export function md5Checksum(md5: Uint8Array | undefined): Entry['checksum'] {
  return md5 && md5.length === 16 ? { algorithm: 'md5', value: Buffer.from(md5).toString('hex') } : undefined;
}
