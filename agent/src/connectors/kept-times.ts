import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { Logger } from 'pino';

/**
 * The modification times this agent kept on objects, by what the store's listing shows of each
 * (docs/connectors.md "Modification times"). An object store keeps a file's time as object
 * metadata (`mtime`), which its listing does not carry: without this index a comparison by size
 * and time HEADs every object whose size matches, as rclone does (one request per unchanged
 * file, the whole cost of a resync). With it, an object the agent wrote or stat'ed is known by
 * its listing alone as long as it is the same object: same size, same ETag, same write time
 * (`LastModified`, which every write and every metadata change renews). Anything else is a miss
 * and the object is stat'ed as before, so a wrong answer needs a store that keeps the ETag and
 * LastModified of an object whose metadata changed, which S3 semantics rule out.
 *
 * One gap, documented: a PUT's answer carries the ETag but not LastModified, so a row the agent
 * wrote is confirmed by the first listing that shows the same size and ETag (that listing's
 * LastModified is recorded then). An object rewritten in between with the same bytes but another
 * `mtime` would be read with the time the agent wrote; its content is the same either way.
 *
 * Stored in SQLite (`node:sqlite`, built into Node ≥ 22.13) under the agent's state directory:
 * lookups by primary key, bounded memory (SQLite's page cache), shared safely by agents on one
 * machine (WAL, a short busy timeout). The index is an optimization only: any error of its own
 * disables it (logged once) and every object is stat'ed again.
 */
export interface KeptTimes {
  /** The kept time of `key` in `store` when the listing shows the object the index recorded; else undefined (stat it). */
  lookup(store: string, key: string, listed: ListedObject): Date | undefined;
  /** What a write (no `lastModified`) or a stat (with it) learned: the object keeps `mtime`. */
  record(store: string, key: string, object: ListedObject & { mtime: Date }): void;
  /** The object was removed or rewritten without a kept time. */
  forget(store: string, key: string): void;
  close(): void;
}

/** What a store's listing shows of an object. */
export interface ListedObject {
  size: number;
  etag: string;
  /** The store's write time; seconds are compared (a HEAD's Last-Modified has no more). */
  lastModified?: Date;
}

const FILE = 'kept-times.sqlite';
const BUSY_TIMEOUT_MS = 1000;
/**
 * Writes are batched into one transaction (a commit each cost 50 µs here, most of a small file's
 * share of the agent's CPU in a first sync): flushed at this many, after `FLUSH_MS`, before a
 * lookup, and on close. Writes lost to a crash only cost stats.
 */
const BATCH_ROWS = 512;
const FLUSH_MS = 200;

/** SQLite's result codes for a file that is no (sound) database. */
const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

/**
 * The index under `stateDir`, or null when it cannot be opened (logged: the agent runs without
 * it). A damaged file is a cache lost: it is replaced by an empty one.
 */
export function openKeptTimes(stateDir: string, log?: Logger): KeptTimes | null {
  try {
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    // Loaded lazily (the agent loads SQLite only where it keeps state), as a built-in: the
    // single-file binary is bundled as CommonJS, without `import.meta`.
    const sqlite = process.getBuiltinModule('node:sqlite') as typeof import('node:sqlite') | undefined;
    if (!sqlite) throw new Error('this node has no node:sqlite (Node 22.13 or later has it)');
    const { DatabaseSync: Database } = sqlite;
    const path = join(stateDir, FILE);
    const open = () => new SqliteKeptTimes(new Database(path, { timeout: BUSY_TIMEOUT_MS }), log);
    try {
      return open();
    } catch (err) {
      const code = (err as { errcode?: number }).errcode;
      if (code !== SQLITE_CORRUPT && code !== SQLITE_NOTADB) throw err;
      log?.warn({ err: (err as Error).message, path }, 'kept modification times index damaged: starting an empty one');
      for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
      return open();
    }
  } catch (err) {
    log?.warn({ err: (err as Error).message, stateDir }, 'kept modification times index unavailable: same-size objects are stat\'ed');
    return null;
  }
}

class SqliteKeptTimes implements KeptTimes {
  private readonly select: StatementSync;
  private readonly confirm: StatementSync;
  private readonly upsert: StatementSync;
  private readonly remove: StatementSync;
  private readonly storeIds = new Map<string, number>();
  private readonly findStore: StatementSync;
  private readonly addStore: StatementSync;
  private broken = false;
  /** Writes not committed yet (BATCH_ROWS). */
  private pending: (() => void)[] = [];
  /** A pending record or forget, which a lookup must see: it flushes first. */
  private unseen = false;
  /** Pending confirmations (store id + key → seconds), seen by lookups without a flush. */
  private confirming = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly db: DatabaseSync, private readonly log?: Logger) {
    db.exec(`PRAGMA journal_mode = WAL;
      PRAGMA synchronous = NORMAL;
      CREATE TABLE IF NOT EXISTS stores (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
      CREATE TABLE IF NOT EXISTS objects (
        store INTEGER NOT NULL, key TEXT NOT NULL, size INTEGER NOT NULL, etag TEXT NOT NULL,
        written INTEGER, mtime INTEGER NOT NULL, PRIMARY KEY (store, key)) WITHOUT ROWID;`);
    this.findStore = db.prepare('SELECT id FROM stores WHERE name = ?');
    this.addStore = db.prepare('INSERT OR IGNORE INTO stores (name) VALUES (?)');
    this.select = db.prepare('SELECT size, etag, written, mtime FROM objects WHERE store = ? AND key = ?');
    this.confirm = db.prepare('UPDATE objects SET written = ? WHERE store = ? AND key = ? AND written IS NULL');
    this.upsert = db.prepare(`INSERT INTO objects (store, key, size, etag, written, mtime) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (store, key) DO UPDATE SET size = excluded.size, etag = excluded.etag, written = excluded.written, mtime = excluded.mtime`);
    this.remove = db.prepare('DELETE FROM objects WHERE store = ? AND key = ?');
  }

  lookup(store: string, key: string, listed: ListedObject): Date | undefined {
    if (this.unseen) this.flush();
    return this.guard(() => {
      const id = this.storeId(store);
      const row = this.select.get(id, key) as { size: number; etag: string; written: number | null; mtime: number } | undefined;
      if (!row || row.size !== listed.size || row.etag !== listed.etag) return undefined;
      const written = seconds(listed.lastModified);
      const known = row.written ?? this.confirming.get(`${id}/${key}`) ?? null;
      if (known === null) {
        // The agent's own write, seen listed for the first time: that listing's write time is the object's.
        if (written !== null) {
          this.confirming.set(`${id}/${key}`, written);
          this.later(() => this.confirm.run(written, id, key));
        }
      } else if (known !== written) return undefined;
      return new Date(row.mtime);
    });
  }

  record(store: string, key: string, object: ListedObject & { mtime: Date }): void {
    this.guard(() => {
      const id = this.storeId(store);
      this.later(() => this.upsert.run(id, key, object.size, object.etag, seconds(object.lastModified), object.mtime.getTime()), true);
    });
  }

  forget(store: string, key: string): void {
    this.guard(() => {
      const id = this.storeId(store);
      this.later(() => this.remove.run(id, key), true);
    });
  }

  close(): void {
    this.flush();
    this.guard(() => this.db.close());
    this.broken = true;
  }

  private later(write: () => void, seen = false): void {
    this.pending.push(write);
    this.unseen ||= seen;
    if (this.pending.length >= BATCH_ROWS) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), FLUSH_MS).unref();
  }

  /** Commits the pending writes in one transaction. */
  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.pending.length === 0) return;
    const writes = this.pending;
    this.pending = [];
    this.unseen = false;
    this.confirming = new Map();
    this.guard(() => {
      // IMMEDIATE: the write lock is taken (waiting out another agent's commit) before any read, so
      // a commit of another agent in between cannot fail this one (SQLITE_BUSY_SNAPSHOT in WAL mode).
      this.db.exec('BEGIN IMMEDIATE');
      try {
        for (const write of writes) write();
        this.db.exec('COMMIT');
      } catch (err) {
        if (this.db.isTransaction) this.db.exec('ROLLBACK');
        throw err;
      }
    });
  }

  private storeId(name: string): number {
    let id = this.storeIds.get(name);
    if (id === undefined) {
      this.addStore.run(name);
      id = Number((this.findStore.get(name) as { id: number | bigint }).id);
      this.storeIds.set(name, id);
    }
    return id;
  }

  private guard<T>(fn: () => T): T | undefined {
    if (this.broken) return undefined;
    try {
      return fn();
    } catch (err) {
      this.broken = true;
      this.log?.warn({ err: (err as Error).message }, 'kept modification times index failed: disabled, same-size objects are stat\'ed');
      return undefined;
    }
  }
}

function seconds(date: Date | undefined): number | null {
  return date ? Math.floor(date.getTime() / 1000) : null;
}
