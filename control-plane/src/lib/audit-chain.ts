import { createHmac } from 'node:crypto';
import { Types, type Collection } from 'mongoose';
import { KeyedMutex } from './keyed-mutex.js';
import { isDuplicateKey } from './duplicate-key.js';

/**
 * The tamper-evident audit trail (docs/security.md "The audit chain"). Records form one chain per
 * account (`chain` = the account id; records without an account form the `system` chain). Each
 * record carries its number in the chain (`seq`, claimed through the unique index {chain, seq},
 * so two writers can never both take one number, on FerretDB too), the hash of the record before
 * it (`prev_hash`) and its own `hash`: HMAC-SHA-256 under the installation's audit key (kept in
 * the database sealed by the master key: lib/system-keys.ts) over the canonical serialization
 * of everything else it holds, so whoever can write the database but lacks the master key cannot
 * make a changed record, or a rewritten chain, verify. Editing, deleting, inserting or reordering records breaks the chain where it
 * was done, which `verifyChain` finds.
 */
export const SYSTEM_CHAIN = 'system';
export const GENESIS_HASH = '0'.repeat(64);
/** Records written before the chain existed are moved to chains of their own (`legacy:<id>`, seq 0), outside every check. */
export const LEGACY_PREFIX = 'legacy:';

export const chainOf = (accountId: unknown): string => (accountId == null ? SYSTEM_CHAIN : String(accountId));

/**
 * JSON with sorted keys, no undefined members, dates as ISO strings and object ids as hex: the
 * same bytes for a record as built and as read back from MongoDB or FerretDB.
 */
export function canonical(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (value instanceof Date) return JSON.stringify({ $date: value.toISOString() });
  if (value instanceof Types.ObjectId) return JSON.stringify({ $oid: value.toHexString() });
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  if (typeof value === 'number' && !Number.isFinite(value)) return 'null';
  return JSON.stringify(value);
}

/** `value` without undefined object members (the driver would store them as null, changing the hash). */
export function withoutUndefined<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : withoutUndefined(v))) as T;
  if (value && typeof value === 'object' && !(value instanceof Date) && !(value instanceof Types.ObjectId) && !Buffer.isBuffer(value)) {
    return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined).map(([k, v]) => [k, withoutUndefined(v)])) as T;
  }
  return value;
}

/** The hash of a stored record: HMAC-SHA-256 under `key` over every field but `hash` itself. */
export function recordHash(record: Record<string, unknown>, key: Buffer): string {
  const { hash: _hash, ...rest } = record;
  return createHmac('sha256', key).update(canonical(rest)).digest('hex');
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Head {
  seq: number;
  hash: string;
}

/** Where the hints of chain heads are kept (`_id` = chain): see `appendToChain`. */
export const HEADS_COLLECTION = 'audit_heads';

/** The head of `chain` as stored: the record with the highest number. */
async function readHead(collection: Collection, chain: string): Promise<Head> {
  const last = await collection.find({ chain }, { projection: { seq: 1, hash: 1 } }).sort({ seq: -1 }).limit(1).next();
  return last ? { seq: last.seq as number, hash: last.hash as string } : { seq: 0, hash: GENESIS_HASH };
}

/**
 * Appends `fields` (the record without chain fields) to the chain of its account, and returns the
 * stored record. The head comes from `heads` (this process's memory), else from the hint in
 * `audit_heads` (a read by `_id`: FerretDB serves nothing else from an index, and reading the
 * head from the records scans them all), else it is taken to be a new chain. The next number is claimed by
 * inserting; on losing it (another writer, a stale hint) the head is read from the records and it
 * tries again. A hint is only ever a record that was inserted, so a stale one costs a retry, never
 * a wrong link; hints are written after the record, best effort.
 */
export async function appendToChain(
  collection: Collection, key: Buffer, fields: Record<string, unknown>, heads: Map<string, Head> = new Map(), attempts = 200,
): Promise<Record<string, unknown>> {
  const chain = chainOf(fields.account_id);
  const hints = collection.conn.collection(HEADS_COLLECTION);
  const hinted = async (): Promise<Head | null> => {
    const hint = await hints.findOne({ _id: chain as never });
    return hint ? { seq: hint.seq as number, hash: hint.hash as string } : null;
  };
  // No hint: most likely a new chain. If it is not, the insert of number 1 says so.
  let head = heads.get(chain) ?? (await hinted()) ?? { seq: 0, hash: GENESIS_HASH };
  for (let attempt = 0; attempt < attempts; attempt++) {
    const record: Record<string, unknown> = withoutUndefined({ _id: new Types.ObjectId(), ...fields, chain, seq: head.seq + 1, prev_hash: head.hash });
    record.hash = recordHash(record, key);
    try {
      await collection.insertOne(record as never);
    } catch (err) {
      heads.delete(chain);
      if (!isDuplicateKey(err)) throw err;
      // Number taken (another writer, a stale hint): back off a little, more as contention persists;
      // then the winner's hint if it has moved past the number, else the records themselves.
      await sleep(Math.random() * Math.min(50, 2 + attempt));
      const hint = await hinted();
      head = hint && hint.seq >= (record.seq as number) ? hint : await readHead(collection, chain);
      continue;
    }
    const written = { seq: record.seq as number, hash: record.hash as string };
    heads.set(chain, written);
    await hints.updateOne({ _id: chain as never, seq: { $lt: written.seq } }, { $set: written }, { upsert: true }).catch(() => {
      // Another writer moved the hint meanwhile (or created it): theirs is as good as ours.
    });
    return record;
  }
  throw new Error(`audit chain ${chain}: could not claim a sequence number after ${attempts} attempts`);
}

/**
 * An instance's writer: its own writes to one chain go one at a time (no instance races itself
 * for a number), and it remembers the heads it wrote, so a record costs one insert; only a
 * number taken by another instance costs a read and a retry. At most `maxHeads` heads are kept.
 */
export class ChainWriter {
  private readonly mutex = new KeyedMutex();
  private readonly heads = new Map<string, Head>();

  constructor(private readonly collection: Collection, private readonly key: Buffer, private readonly maxHeads = 10_000) {}

  append(fields: Record<string, unknown>): Promise<Record<string, unknown>> {
    const chain = chainOf(fields.account_id);
    return this.mutex.run(chain, async () => {
      const head = this.heads.get(chain);
      // Most recently used last, so the oldest is the first to go.
      if (head) {
        this.heads.delete(chain);
        this.heads.set(chain, head);
      }
      try {
        return await appendToChain(this.collection, this.key, fields, this.heads);
      } finally {
        while (this.heads.size > this.maxHeads) this.heads.delete(this.heads.keys().next().value as string);
      }
    });
  }
}

export interface ChainBreak {
  chain: string;
  /** The first record that does not fit, or the number where a missing record should be. */
  seq: number;
  id: string | null;
  problem: string;
}

export interface ChainReport {
  chain: string;
  records: number;
  head: { seq: number; hash: string } | null;
  /** Where the walk started when older records were expired (`audit.expire`): the last expired record. */
  expired_through: { seq: number; hash: string } | null;
  broken: ChainBreak | null;
}

/**
 * The action of the record the retention sweeper appends before it deletes a chain's oldest
 * records (plugins/app/retention/): `details.through_seq` and `details.through_hash` name the last
 * record deleted, the checkpoint a verification starts from. It is in the chain itself, hashed
 * like every record, so a forged or edited checkpoint breaks the chain as any record would.
 */
export const EXPIRE_ACTION = 'audit.expire';

/** The checkpoint of a chain: its `audit.expire` record reaching furthest, or null when nothing was expired. */
export async function expiredThrough(collection: Collection, chain: string): Promise<{ seq: number; hash: string } | null> {
  // Two sweepers side by side may each have expired a prefix: the longest one is gone.
  const doc = await collection.find({ chain, action: EXPIRE_ACTION, outcome: 'success' }, { projection: { details: 1 } })
    .sort({ 'details.through_seq': -1 }).limit(1).next();
  const details = doc?.details as { through_seq?: unknown; through_hash?: unknown } | undefined;
  if (!details || typeof details.through_seq !== 'number' || typeof details.through_hash !== 'string') return null;
  return { seq: details.through_seq, hash: details.through_hash };
}

/** The oldest records of a chain that may be expired. */
export interface ExpirablePrefix {
  /** The last record of the prefix. */
  through: { seq: number; hash: string; timestamp: Date };
  first_seq: number;
  count: number;
}

/**
 * The longest run of a chain's oldest records (at most `limit`) whose timestamps are all before
 * `before`, never its head, or null when there is none
 * or it holds only earlier `audit.expire` records (expiring those alone would only write another).
 */
export async function expirablePrefix(collection: Collection, chain: string, before: Date, limit: number): Promise<ExpirablePrefix | null> {
  const after = await expiredThrough(collection, chain);
  const docs = await collection.find({ chain, ...(after ? { seq: { $gt: after.seq } } : {}) }, { projection: { seq: 1, hash: 1, timestamp: 1, action: 1 } })
    .sort({ seq: 1 }).limit(limit + 1).toArray();
  const prefix = [];
  for (const doc of docs.slice(0, limit)) {
    if (!(doc.timestamp instanceof Date) || doc.timestamp >= before) break;
    prefix.push(doc);
  }
  // Never the head: a writer that loses its number reads the head from the records
  // (`readHead`), which must never find an empty chain and start again at 1.
  if (prefix.length === docs.length) prefix.pop();
  if (prefix.length === 0 || prefix.every((d) => d.action === EXPIRE_ACTION)) return null;
  const last = prefix[prefix.length - 1]!;
  return { through: { seq: last.seq as number, hash: last.hash as string, timestamp: last.timestamp as Date }, first_seq: prefix[0]!.seq as number, count: prefix.length };
}

/**
 * Deletes a chain's records up to number `seq`: only the retention sweeper does, after appending
 * the `audit.expire` record naming `seq` (the model's hooks refuse deletes through mongoose).
 */
export async function deleteThrough(collection: Collection, chain: string, seq: number): Promise<number> {
  const { deletedCount } = await collection.deleteMany({ chain, seq: { $lte: seq } });
  return deletedCount;
}

/**
 * Walks one chain in order and stops at the first record that breaks it. When older records were
 * expired (`expiredThrough`), the walk starts after the checkpoint, from its number and hash;
 * records at or before it that are still there (a sweep interrupted between its checkpoint and
 * its delete) are outside the walk.
 */
export async function verifyChain(collection: Collection, key: Buffer, chain: string): Promise<ChainReport> {
  const checkpoint = await expiredThrough(collection, chain);
  let expected = (checkpoint?.seq ?? 0) + 1;
  let prev = checkpoint?.hash ?? GENESIS_HASH;
  let records = 0;
  const cursor = collection.find({ chain, ...(checkpoint ? { seq: { $gt: checkpoint.seq } } : {}) }).sort({ seq: 1 });
  const report = (broken: ChainBreak | null): ChainReport => ({
    chain, records, head: records > 0 ? { seq: expected - 1, hash: prev } : null, expired_through: checkpoint, broken,
  });
  try {
    for await (const doc of cursor) {
      const id = String(doc._id);
      const seq = doc.seq as number;
      if (seq !== expected) {
        return report({
          chain, seq: expected, id: seq > expected ? null : id,
          problem: seq > expected ? `record ${expected} is missing (the next one is ${seq}, ${id})` : `record ${id} has number ${seq}, expected ${expected}`,
        });
      }
      if (doc.prev_hash !== prev) return report({ chain, seq, id, problem: `record ${seq} (${id}) does not follow record ${seq - 1}: prev_hash differs (removed, inserted or reordered records)` });
      if (recordHash(doc, key) !== doc.hash) return report({ chain, seq, id, problem: `record ${seq} (${id}) was altered: its content does not match its hash` });
      records++;
      expected++;
      prev = doc.hash as string;
    }
  } finally {
    await cursor.close();
  }
  return report(null);
}

/** The chains to verify: one account's, or all of them (legacy records excluded). */
export async function chainsToVerify(collection: Collection, accountId?: string): Promise<string[]> {
  if (accountId !== undefined) return [chainOf(accountId)];
  const chains = (await collection.distinct('chain')) as unknown[];
  return chains.filter((c): c is string => typeof c === 'string' && !c.startsWith(LEGACY_PREFIX)).sort();
}

/**
 * Records written before the chain existed have no `chain`: each is given a chain of its own
 * (`legacy:<id>`, number 0), so the unique index can be built and no real chain includes them.
 * Idempotent; run at start before the indexes are created.
 */
export async function setAsideLegacyRecords(collection: Collection): Promise<number> {
  let moved = 0;
  for (;;) {
    const batch = await collection.find({ chain: null }, { projection: { _id: 1 } }).limit(500).toArray();
    if (batch.length === 0) return moved;
    const result = await collection.bulkWrite(batch.map((d) => ({
      updateOne: { filter: { _id: d._id, chain: null }, update: { $set: { chain: `${LEGACY_PREFIX}${String(d._id)}`, seq: 0 } } },
    })), { ordered: false });
    moved += result.modifiedCount;
  }
}
