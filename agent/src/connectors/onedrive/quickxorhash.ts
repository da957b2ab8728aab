/**
 * QuickXorHash, the content hash OneDrive for Business and SharePoint report for every file
 * (`file.hashes.quickXorHash`, base64), as Microsoft documents it
 * (learn.microsoft.com/onedrive/developer/code-snippets/quickxorhash): byte `i` of the input is
 * XORed into a 160-bit circular vector at bit offset `(i * 11) mod 160`, the 64-bit little-endian
 * input length is XORed into the last 8 bytes, and the 20 bytes are the digest.
 *
 * Bytes 160 positions apart land at the same offset, so instead of shifting every byte into the
 * vector (Microsoft's sample does that per byte), the input is first XOR-folded into 160 lanes by
 * `position mod 160` — one XOR per byte — and the lanes are placed into the vector once, at the
 * end. The result is the same (XOR commutes); the fold is what makes it cheap enough to run over
 * every byte an upload sends.
 */
export class QuickXorHash {
  private static readonly WIDTH_BITS = 160;
  private static readonly SHIFT = 11;
  private readonly lanes = new Uint8Array(QuickXorHash.WIDTH_BITS);
  /** Position of the next input byte modulo 160. */
  private phase = 0;
  private length = 0;

  update(data: Uint8Array): this {
    const lanes = this.lanes;
    let phase = this.phase;
    for (let i = 0; i < data.length; i++) {
      lanes[phase]! ^= data[i]!;
      if (++phase === 160) phase = 0;
    }
    this.phase = phase;
    this.length += data.length;
    return this;
  }

  /** The 20-byte digest. */
  digest(): Buffer {
    const out = Buffer.alloc(QuickXorHash.WIDTH_BITS / 8);
    for (let lane = 0; lane < QuickXorHash.WIDTH_BITS; lane++) {
      const byte = this.lanes[lane]!;
      if (byte === 0) continue;
      const offset = (lane * QuickXorHash.SHIFT) % QuickXorHash.WIDTH_BITS;
      const index = offset >> 3;
      const bit = offset & 7;
      out[index]! ^= (byte << bit) & 0xff;
      // The bits that spill past this byte go into the next one, wrapping around the vector.
      if (bit > 0) out[(index + 1) % out.length]! ^= byte >> (8 - bit);
    }
    // The length, 64-bit little-endian, XORed into the last 8 bytes.
    const lengthBytes = Buffer.alloc(8);
    lengthBytes.writeBigUInt64LE(BigInt(this.length));
    for (let i = 0; i < 8; i++) out[out.length - 8 + i]! ^= lengthBytes[i]!;
    return out;
  }

  /** The digest in base64, as Graph reports it. */
  digestBase64(): string {
    return this.digest().toString('base64');
  }
}
