/**
 * XDR (RFC 4506), the subset ONC-RPC, MOUNT3 and NFSv3 use: big-endian 32-bit words, 64-bit
 * hyper integers, fixed and variable-length opaque data padded to four bytes, strings.
 * Integers above 2^53 (file sizes, offsets) cannot occur in files this agent copies, so hypers
 * are JavaScript numbers; directory cookies and verifiers stay opaque 8-byte buffers.
 */
export class XdrWriter {
  private buf: Buffer;
  private len = 0;

  constructor(initialBytes = 256) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  u32(value: number): this {
    this.room(4);
    this.buf.writeUInt32BE(value >>> 0, this.len);
    this.len += 4;
    return this;
  }

  bool(value: boolean): this {
    return this.u32(value ? 1 : 0);
  }

  u64(value: number): this {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`not an unsigned 64-bit integer: ${value}`);
    this.room(8);
    this.buf.writeBigUInt64BE(BigInt(value), this.len);
    this.len += 8;
    return this;
  }

  /** Fixed-length opaque (a verifier, a cookie): the bytes and their padding, no length. */
  fixed(bytes: Buffer): this {
    const padded = pad(bytes.length);
    this.room(padded);
    bytes.copy(this.buf, this.len);
    this.buf.fill(0, this.len + bytes.length, this.len + padded);
    this.len += padded;
    return this;
  }

  /** Variable-length opaque: length word, bytes, padding. */
  opaque(bytes: Buffer): this {
    return this.u32(bytes.length).fixed(bytes);
  }

  string(value: string): this {
    return this.opaque(Buffer.from(value, 'utf8'));
  }

  /** The bytes written so far (a view, not a copy). */
  finish(): Buffer {
    return this.buf.subarray(0, this.len);
  }

  private room(bytes: number): void {
    if (this.len + bytes <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + bytes));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }
}

/** Reads XDR from one reply; running past its end is a malformed reply (XdrError). */
export class XdrReader {
  constructor(
    private readonly buf: Buffer,
    private pos = 0,
  ) {}

  get remaining(): number {
    return this.buf.length - this.pos;
  }

  u32(): number {
    this.need(4);
    const value = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return value;
  }

  bool(): boolean {
    return this.u32() !== 0;
  }

  u64(): number {
    this.need(8);
    const value = this.buf.readBigUInt64BE(this.pos);
    this.pos += 8;
    // Sizes past 2^53 are clamped rather than wrong: no file that large exists to copy.
    return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(value);
  }

  /** Fixed-length opaque of `length` bytes (a view into the reply), skipping its padding. */
  fixed(length: number): Buffer {
    this.need(pad(length));
    const bytes = this.buf.subarray(this.pos, this.pos + length);
    this.pos += pad(length);
    return bytes;
  }

  /** Variable-length opaque, refused above `max` bytes (the protocol's bound). */
  opaque(max = Number.MAX_SAFE_INTEGER): Buffer {
    const length = this.u32();
    if (length > max) throw new XdrError(`opaque of ${length} bytes exceeds its bound of ${max}`);
    return this.fixed(length);
  }

  string(max?: number): string {
    return this.opaque(max).toString('utf8');
  }

  skip(bytes: number): void {
    this.need(bytes);
    this.pos += bytes;
  }

  private need(bytes: number): void {
    if (this.pos + bytes > this.buf.length) throw new XdrError(`reply ends after ${this.buf.length} bytes, ${this.pos + bytes} needed`);
  }
}

/** A reply that does not decode: the server (or something between) sent what the protocol does not allow. */
export class XdrError extends Error {
  override name = 'XdrError';
}

/** `length` rounded up to a multiple of four. */
export function pad(length: number): number {
  return (length + 3) & ~3;
}
