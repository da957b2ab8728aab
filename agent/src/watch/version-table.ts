import { hash } from 'node:crypto';

/**
 * The compact per-watcher memory of a folder: for every file the last complete listing showed,
 * a 128-bit digest of its path, a 64-bit digest of its version identity, since when that identity
 * has been seen unchanged, whether it was reported, and the poll that last saw it. No string is
 * kept: 40 bytes a slot in typed arrays (open addressing, linear probing, at most 3/4 full), so a
 * 100,000-file folder costs at most 10 MiB whatever its path lengths, and the same on every poll
 * (docs/agent.md "Watching a folder").
 *
 * Digests are the first 16 (path) and 8 (identity) bytes of SHA-256: two paths sharing a slot
 * would take about 2⁶⁴ hashes to find even when both names are chosen, so nobody who may write to
 * the folder can make files displace each other; two identities of one path colliding by chance
 * (a change not seen) has odds of 1 in 2⁶⁴ per change.
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

/** A 64-bit digest of `text` (a version identity) as two unsigned 32-bit halves. */
export function digest(text: string): [number, number] {
  const d = hash('sha256', text, 'buffer');
  return [d.readUInt32BE(0), d.readUInt32BE(4)];
}

/** A 128-bit digest of a path as four unsigned 32-bit words. */
export type PathKey = readonly [number, number, number, number];

export function pathKey(path: string): PathKey {
  const d = hash('sha256', path, 'buffer');
  return [d.readUInt32BE(0), d.readUInt32BE(4), d.readUInt32BE(8), d.readUInt32BE(12)];
}

// A slot's words: the path key (0–3), the identity digest, the poll that last saw it, flags.
const STRIDE = 8;
const ID = 4;
const EPOCH = 6;
const FLAGS = 7;
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

  /** The slot of a path, or undefined. */
  get(key: PathKey): Slot | undefined {
    const i = this.find(key);
    if (i < 0) return undefined;
    const w = this.words;
    const o = i * STRIDE;
    return { idHi: w[o + ID]!, idLo: w[o + ID + 1]!, since: this.sinceMs[i]!, reported: (w[o + FLAGS]! & F_REPORTED) !== 0 };
  }

  /** Records the path's identity and state, seen in poll `epoch` (inserting the path if new). */
  set(key: PathKey, slot: Slot, epoch: number): void {
    let i = this.find(key);
    if (i < 0) {
      if ((this.count + 1) * 4 > (this.mask + 1) * 3) this.resize((this.mask + 1) * 2);
      i = this.emptySlotFor(key[3]);
      this.count++;
    }
    const w = this.words;
    const o = i * STRIDE;
    w.set(key, o);
    w[o + ID] = slot.idHi;
    w[o + ID + 1] = slot.idLo;
    w[o + EPOCH] = epoch >>> 0;
    w[o + FLAGS] = F_USED | (slot.reported ? F_REPORTED : 0);
    this.sinceMs[i] = slot.since;
  }

  /** Marks the path as seen in poll `epoch`, leaving the rest as is. */
  touch(key: PathKey, epoch: number): void {
    const i = this.find(key);
    if (i >= 0) this.words[i * STRIDE + EPOCH] = epoch >>> 0;
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
      if ((w[o + FLAGS]! & F_USED) !== 0 && w[o + EPOCH] !== e) {
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
      const f = this.words[i * STRIDE + FLAGS]!;
      if ((f & F_USED) !== 0 && (f & F_REPORTED) === 0) n++;
    }
    return n;
  }

  /** The first slot to probe for a key whose last word is `last`. */
  private home(last: number): number {
    return last & this.mask;
  }

  private find(key: PathKey): number {
    const w = this.words;
    for (let i = this.home(key[3]); ; i = (i + 1) & this.mask) {
      const o = i * STRIDE;
      if ((w[o + FLAGS]! & F_USED) === 0) return -1;
      if (w[o + 3] === key[3] && w[o] === key[0] && w[o + 1] === key[1] && w[o + 2] === key[2]) return i;
    }
  }

  private emptySlotFor(last: number): number {
    const w = this.words;
    let i = this.home(last);
    while ((w[i * STRIDE + FLAGS]! & F_USED) !== 0) i = (i + 1) & this.mask;
    return i;
  }

  /** Deletes slot `i` by shifting back the entries of its probe run (no tombstones). */
  private removeAt(i: number): void {
    const w = this.words;
    let hole = i;
    for (let j = (hole + 1) & this.mask; ; j = (j + 1) & this.mask) {
      const o = j * STRIDE;
      if ((w[o + FLAGS]! & F_USED) === 0) break;
      const k = this.home(w[o + 3]!);
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
      if ((oldWords[o + FLAGS]! & F_USED) === 0) continue;
      const j = this.emptySlotFor(oldWords[o + 3]!);
      this.words.set(oldWords.subarray(o, o + STRIDE), j * STRIDE);
      this.sinceMs[j] = oldSince[i]!;
    }
  }
}
