import { hash } from 'node:crypto';

/**
 * The compact per-watcher memory of a folder: for every file the last complete listing showed,
 * a 64-bit digest of its path, a 64-bit digest of its version identity, since when that identity
 * has been seen unchanged, whether it was reported, and the poll that last saw it. No string is
 * kept: 32 bytes a slot in typed arrays (open addressing, linear probing, at most 3/4 full), so a
 * 100,000-file folder costs at most 8 MiB whatever its path lengths, and the same on every poll
 * (docs/agent.md "Watching a folder").
 *
 * Digests are the first 8 bytes of SHA-256: accidental collisions among 100,000 paths have odds
 * of about 1 in 10⁹; hiding a file behind another's takes about 2⁶⁴ hashes (docs/agent.md says what
 * a pair of deliberately colliding names of one's own can do).
 */

/** What the table holds for one path. */
export interface Slot {
  /** Digest of the version identity (identity.ts), as two 32-bit halves. */
  readonly idHi: number;
  readonly idLo: number;
  /** Agent clock (ms) when this identity was first seen. */
  readonly since: number;
  /** This version was reported (or taken as present before the watcher started). */
  readonly reported: boolean;
}

/** A 64-bit digest of `text` as two unsigned 32-bit halves. */
export function digest(text: string): [number, number] {
  const d = hash('sha256', text, 'buffer');
  return [d.readUInt32BE(0), d.readUInt32BE(4)];
}

const STRIDE = 6; // pathHi, pathLo, idHi, idLo, epoch, flags
const F_USED = 1;
const F_REPORTED = 2;
const MIN_CAPACITY = 64;

export class VersionTable {
  private words: Uint32Array;
  private sinceMs: Float64Array;
  private mask: number;
  private count = 0;

  constructor(capacity = MIN_CAPACITY) {
    const cap = Math.max(MIN_CAPACITY, 2 ** Math.ceil(Math.log2(capacity)));
    this.words = new Uint32Array(cap * STRIDE);
    this.sinceMs = new Float64Array(cap);
    this.mask = cap - 1;
  }

  /** Paths held. */
  get size(): number {
    return this.count;
  }

  /** Bytes of the table's arrays (what the watcher's memory grows with). */
  get byteLength(): number {
    return this.words.byteLength + this.sinceMs.byteLength;
  }

  /** The slot of a path digest, or undefined. */
  get(pathHi: number, pathLo: number): Slot | undefined {
    const i = this.find(pathHi, pathLo);
    if (i < 0) return undefined;
    const w = this.words;
    const o = i * STRIDE;
    return { idHi: w[o + 2]!, idLo: w[o + 3]!, since: this.sinceMs[i]!, reported: (w[o + 5]! & F_REPORTED) !== 0 };
  }

  /** Records the path's identity and state, seen in poll `epoch` (inserting the path if new). */
  set(pathHi: number, pathLo: number, slot: Slot, epoch: number): void {
    let i = this.find(pathHi, pathLo);
    if (i < 0) {
      if ((this.count + 1) * 4 > (this.mask + 1) * 3) this.resize((this.mask + 1) * 2);
      i = this.emptySlotFor(pathHi, pathLo);
      this.count++;
    }
    const w = this.words;
    const o = i * STRIDE;
    w[o] = pathHi;
    w[o + 1] = pathLo;
    w[o + 2] = slot.idHi;
    w[o + 3] = slot.idLo;
    w[o + 4] = epoch >>> 0;
    w[o + 5] = F_USED | (slot.reported ? F_REPORTED : 0);
    this.sinceMs[i] = slot.since;
  }

  /** Marks the path as seen in poll `epoch`, leaving the rest as is. */
  touch(pathHi: number, pathLo: number, epoch: number): void {
    const i = this.find(pathHi, pathLo);
    if (i >= 0) this.words[i * STRIDE + 4] = epoch >>> 0;
  }

  /**
   * Forgets every path not seen in poll `epoch` (files gone since), then gives memory back when
   * the folder shrank to under an eighth of the table. Returns how many were forgotten.
   */
  sweep(epoch: number): number {
    const w = this.words;
    const e = epoch >>> 0;
    let removed = 0;
    for (let i = 0; i <= this.mask; ) {
      const o = i * STRIDE;
      if ((w[o + 5]! & F_USED) !== 0 && w[o + 4] !== e) {
        this.removeAt(i);
        removed++;
        // removeAt may have shifted a later entry into slot i: look at it again.
        continue;
      }
      i++;
    }
    const cap = this.mask + 1;
    if (cap > MIN_CAPACITY && this.count * 8 < cap) this.resize(Math.max(MIN_CAPACITY, 2 ** Math.ceil(Math.log2(this.count * 2 + 1))));
    return removed;
  }

  /** Counts the paths whose current version is waiting to be reported. */
  waiting(): number {
    let n = 0;
    for (let i = 0; i <= this.mask; i++) {
      const f = this.words[i * STRIDE + 5]!;
      if ((f & F_USED) !== 0 && (f & F_REPORTED) === 0) n++;
    }
    return n;
  }

  private home(pathLo: number): number {
    return pathLo & this.mask;
  }

  private find(pathHi: number, pathLo: number): number {
    const w = this.words;
    for (let i = this.home(pathLo); ; i = (i + 1) & this.mask) {
      const o = i * STRIDE;
      if ((w[o + 5]! & F_USED) === 0) return -1;
      if (w[o] === pathHi && w[o + 1] === pathLo) return i;
    }
  }

  private emptySlotFor(_pathHi: number, pathLo: number): number {
    const w = this.words;
    let i = this.home(pathLo);
    while ((w[i * STRIDE + 5]! & F_USED) !== 0) i = (i + 1) & this.mask;
    return i;
  }

  /** Deletes slot `i` by shifting back the entries of its probe run (no tombstones). */
  private removeAt(i: number): void {
    const w = this.words;
    let hole = i;
    for (let j = (hole + 1) & this.mask; ; j = (j + 1) & this.mask) {
      const o = j * STRIDE;
      if ((w[o + 5]! & F_USED) === 0) break;
      const k = this.home(w[o + 1]!);
      // The entry at j may move to the hole unless its home lies cyclically in (hole, j].
      const stays = hole <= j ? hole < k && k <= j : hole < k || k <= j;
      if (stays) continue;
      w.copyWithin(hole * STRIDE, o, o + STRIDE);
      this.sinceMs[hole] = this.sinceMs[j]!;
      hole = j;
    }
    w.fill(0, hole * STRIDE, hole * STRIDE + STRIDE);
    this.sinceMs[hole] = 0;
    this.count--;
  }

  private resize(capacity: number): void {
    const oldWords = this.words;
    const oldSince = this.sinceMs;
    this.words = new Uint32Array(capacity * STRIDE);
    this.sinceMs = new Float64Array(capacity);
    this.mask = capacity - 1;
    for (let i = 0; i < oldSince.length; i++) {
      const o = i * STRIDE;
      if ((oldWords[o + 5]! & F_USED) === 0) continue;
      const j = this.emptySlotFor(oldWords[o]!, oldWords[o + 1]!);
      this.words.set(oldWords.subarray(o, o + STRIDE), j * STRIDE);
      this.sinceMs[j] = oldSince[i]!;
    }
  }
}
