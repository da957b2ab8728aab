import { isIPv6 } from 'node:net';
import type { Types } from 'mongoose';
import type { LoginLockoutConfig } from '../../../config.js';
import { RateLimitedError } from '../../../errors.js';
import { sha256Hex } from '../../../lib/crypto.js';
import { KeyedMutex } from '../../../lib/keyed-mutex.js';
import type { Models } from '../../../models/index.js';

/** What a sign-in attempt is counted against: the email (hashed) and the client address. */
export interface LockKeys {
  email: string;
  ip: string;
}

/** A lock in force: which key, and for how long still. */
export interface Lock {
  on: 'email' | 'ip';
  retryAfterSeconds: number;
}

/** The attempt's own counted documents, to forget it when it turns out not to be a failure. */
export type AttemptIds = Types.ObjectId[];

const SWEEP_EVERY_MS = 60_000;

/** What the lockout service needs: where attempts are counted, and its thresholds and delays. */
export interface LoginLockoutServiceOptions {
  db: Models;
  config: LoginLockoutConfig;
}

/**
 * Refuses `/auth/login` for a growing time after repeated failures, per email and per client
 * address, across instances (docs/security.md "Sign-in lockout").
 *
 * State lives in `login_attempts`, one inserted document per attempt and key, counted and never
 * updated (FerretDB updates are not atomic). An attempt is inserted *before* its password is
 * checked, then the attempts ordered before it (by `_id`) are counted again: a burst of parallel
 * guesses sees itself and is refused, rather than all passing a check made before any of them
 * was recorded. A refused attempt removes its documents again, so hammering a locked email does
 * not extend the lock; a failed one keeps them; a successful one clears the email's failures
 * (not the address's: one valid account must not reset an address guessing at others).
 *
 * Unknown emails are counted and locked exactly like known ones, and a locked attempt does no
 * password work for either, so neither the answer nor its timing says whether an email exists.
 */
export class LoginLockoutService {
  private readonly db: Models;
  private readonly config: LoginLockoutConfig;
  private lastSweep = 0;
  /**
   * An attempt's insert and count, one at a time per email and per address on this instance: the
   * count sees attempts ordered before it only once their inserts are done, and parallel inserts
   * finish in any order, so a burst could count fewer than came before it and pass (a CI run let
   * 6 of 12 parallel guesses through a threshold of 3). Across instances that window remains.
   */
  private readonly order = new KeyedMutex();

  constructor(opts: LoginLockoutServiceOptions) {
    this.db = opts.db;
    this.config = opts.config;
  }

  /** The stored keys: the email hashed (no plain emails of non-users kept), IPv6 clients by /64. */
  static keys(email: string, ip: string): LockKeys {
    return { email: `email:${sha256Hex(email)}`, ip: `ip:${addressKey(ip)}` };
  }

  /** The lock in force for these keys, counting only attempts before `before` when given. */
  async lockOf(keys: LockKeys, before?: AttemptIds): Promise<Lock | null> {
    const [email, ip] = await Promise.all([
      this.lockOfKey(keys.email, this.config.emailThreshold, before?.[0]),
      this.lockOfKey(keys.ip, this.config.ipThreshold, before?.[1]),
    ]);
    const locks = [email && { on: 'email' as const, retryAfterSeconds: email }, ip && { on: 'ip' as const, retryAfterSeconds: ip }]
      .filter((l): l is Lock => !!l);
    return locks.sort((a, b) => b.retryAfterSeconds - a.retryAfterSeconds)[0] ?? null;
  }

  /**
   * Counts an attempt, then checks again with it in place: null and the attempt's ids when it may
   * go on to the password check, or the lock (the attempt already forgotten).
   */
  async begin(keys: LockKeys): Promise<{ lock: Lock; ids: null } | { lock: null; ids: AttemptIds }> {
    // Email first, then address, for every attempt: no two wait on each other in a cycle.
    return this.order.run(keys.email, () => this.order.run(keys.ip, async () => {
      const at = new Date();
      const docs = await this.db.loginAttempts.insertMany([{ key: keys.email, at }, { key: keys.ip, at }]);
      const ids = docs.map((d) => d._id);
      this.sweep(at);
      const lock = await this.lockOf(keys, ids);
      if (!lock) return { lock: null, ids };
      await this.forget(ids);
      return { lock, ids: null };
    }));
  }

  /** Not a failure after all (a correct password waiting for its second factor). */
  async forget(ids: AttemptIds): Promise<void> {
    await this.db.loginAttempts.deleteMany({ _id: { $in: ids } });
  }

  /** A successful sign-in: the email starts afresh; the address keeps its earlier failures. */
  async succeeded(keys: LockKeys, ids: AttemptIds): Promise<void> {
    await this.db.loginAttempts.deleteMany({ $or: [{ key: keys.email }, { _id: { $in: ids } }] });
  }

  /** The lock's remaining seconds for one key, or 0. */
  private async lockOfKey(key: string, threshold: number, before: Types.ObjectId | undefined): Promise<number> {
    const now = Date.now();
    const { baseMs, maxMs, windowMs } = this.config;
    // Past this many failures the delay is at its maximum: no need to count further.
    const cap = threshold + Math.ceil(Math.log2(maxMs / baseMs)) + 1;
    const filter = { key, at: { $gte: new Date(now - windowMs) }, ...(before ? { _id: { $lt: before } } : {}) };
    const recent = await this.db.loginAttempts.find(filter, { at: 1 }).sort({ _id: -1 }).limit(cap).lean();
    if (recent.length < threshold) return 0;
    const delay = Math.min(maxMs, baseMs * 2 ** (recent.length - threshold));
    const until = recent[0]!.at.getTime() + delay;
    return until > now ? Math.ceil((until - now) / 1000) : 0;
  }

  /** Forgets attempts older than the window, at most once a minute per instance, off the request. */
  private sweep(now: Date): void {
    if (now.getTime() - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now.getTime();
    this.db.loginAttempts.deleteMany({ at: { $lt: new Date(now.getTime() - this.config.windowMs) } }).catch(() => {
      this.lastSweep = 0;
    });
  }
}

/** The 429 of a locked sign-in: the same words whichever key is locked and whether the email exists. */
export function lockedError(lock: Lock): RateLimitedError {
  return new RateLimitedError(`Too many failed sign-in attempts; try again in ${lock.retryAfterSeconds} s`, lock.retryAfterSeconds);
}

/** An IPv6 client is keyed by its /64 (one subscriber's usual allocation), anything else as is. */
function addressKey(ip: string): string {
  if (!isIPv6(ip) || ip.includes('.')) return ip;
  const [head = '', tail] = ip.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => g.toLowerCase().replace(/^0+(?=.)/, '')).join(':')}::/64`;
}
