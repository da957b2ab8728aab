/**
 * QuickXorHash as Microsoft's reference C# sample computes it
 * (learn.microsoft.com/onedrive/developer/code-snippets/quickxorhash): three 64-bit cells (the
 * last holding 32 bits) forming a 160-bit circular vector, each update xoring its bytes in at a
 * shift that advances 11 bits per byte, the length xored into the last 8 bytes at the end.
 *
 * The Graph fake's own port, kept apart from the connector's (agent/src/connectors/onedrive/
 * quickxorhash.ts, which folds differently): the fake reports what it stored, the connector
 * compares it with what it sent, and two independent implementations agreeing is the point.
 */
export class ReferenceQuickXorHash {
  private static readonly WIDTH_IN_BITS = 160;
  private static readonly SHIFT = 11;
  private static readonly BITS_IN_LAST_CELL = 32;
  private readonly data = [0n, 0n, 0n];
  private lengthSoFar = 0n;
  private shiftSoFar = 0;

  update(array: Uint8Array): this {
    const width = ReferenceQuickXorHash.WIDTH_IN_BITS;
    let vectorArrayIndex = Math.floor(this.shiftSoFar / 64);
    let vectorOffset = this.shiftSoFar % 64;
    const iterations = Math.min(array.length, width);
    for (let i = 0; i < iterations; i++) {
      const isLastCell = vectorArrayIndex === this.data.length - 1;
      const bitsInVectorCell = isLastCell ? ReferenceQuickXorHash.BITS_IN_LAST_CELL : 64;
      // The sample's two branches both xor every 160th byte from i together; done once here.
      let xoredByte = 0;
      for (let j = i; j < array.length; j += width) xoredByte ^= array[j]!;
      const value = BigInt(xoredByte);
      if (vectorOffset <= bitsInVectorCell - 8) {
        this.data[vectorArrayIndex] = this.data[vectorArrayIndex]! ^ (value << BigInt(vectorOffset));
      } else {
        const index2 = isLastCell ? 0 : vectorArrayIndex + 1;
        const low = BigInt(bitsInVectorCell - vectorOffset);
        this.data[vectorArrayIndex] = this.data[vectorArrayIndex]! ^ (value << BigInt(vectorOffset));
        this.data[index2] = this.data[index2]! ^ (value >> low);
      }
      vectorOffset += ReferenceQuickXorHash.SHIFT;
      while (vectorOffset >= bitsInVectorCell) {
        vectorArrayIndex = isLastCell ? 0 : vectorArrayIndex + 1;
        vectorOffset -= bitsInVectorCell;
      }
    }
    this.shiftSoFar = (this.shiftSoFar + ReferenceQuickXorHash.SHIFT * (array.length % width)) % width;
    this.lengthSoFar += BigInt(array.length);
    return this;
  }

  /** Base64 of the 20-byte digest, as Graph's `file.hashes.quickXorHash`. */
  digestBase64(): string {
    const rgb = Buffer.alloc(20);
    // Cells as little-endian bytes; bits a cell holds beyond its width (the shifts above do not mask) are dropped.
    rgb.writeBigUInt64LE(this.data[0]! & 0xffffffffffffffffn, 0);
    rgb.writeBigUInt64LE(this.data[1]! & 0xffffffffffffffffn, 8);
    rgb.writeUInt32LE(Number(this.data[2]! & 0xffffffffn), 16);
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(this.lengthSoFar);
    for (let i = 0; i < 8; i++) rgb[12 + i]! ^= length[i]!;
    return rgb.toString('base64');
  }
}
