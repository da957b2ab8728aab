import { renameSync, writeFileSync, appendFileSync, chmodSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Models } from '../models/index.js';
import { SEALED_FIELDS, boundTo } from './sealed-fields.js';
import { keyFiles, keyId, readRetiredKeyFile, type Sealed, type Vault } from './vault.js';

export interface FieldCounts {
  scanned: number;
  /** Sealed again under the active key, bound (format 2). */
  resealed: number;
  /** Already under the active key and bound. */
  current: number;
  /** Replaced by another writer between read and reseal: the new value is that writer's; run again to check it. */
  changed_meanwhile: number;
  /** Could not be opened: its key is not configured, or it does not belong to its record (altered or moved). */
  unreadable: number;
}

export interface ResealReport extends FieldCounts {
  active_kid: string;
  by_field: Record<string, FieldCounts>;
  /** `<collection>/<id>.<field>` of the first unreadable values (at most 20). */
  unreadable_values: string[];
}

const zero = (): FieldCounts => ({ scanned: 0, resealed: 0, current: 0, changed_meanwhile: 0, unreadable: 0 });

/**
 * Seals every stale value again (under a retired key, or format 1 without binding) under the
 * active key, bound to its record. Safe beside running instances: each value is replaced only if
 * it is still the one read (compare-and-swap on its key id and iv), so a value written meanwhile
 * by an instance wins and is left for the next run; instances open values under either key
 * throughout. Idempotent and resumable: a second run (after a crash, say) finds only what is
 * still stale.
 */
export async function resealAll(db: Models, vault: Vault, signal?: AbortSignal): Promise<ResealReport> {
  const report: ResealReport = { active_kid: vault.activeKid, ...zero(), by_field: {}, unreadable_values: [] };
  for (const { model, field, purpose } of SEALED_FIELDS) {
    const counts = (report.by_field[`${model}.${field}`] = zero());
    const collection = db[model].collection;
    const cursor = collection.find({ [field]: { $ne: null } }, { projection: { _id: 1, account_id: 1, [field]: 1 } });
    for await (const doc of cursor) {
      signal?.throwIfAborted();
      counts.scanned++;
      const sealed = doc[field] as Sealed;
      if (!vault.isStale(sealed)) {
        counts.current++;
        continue;
      }
      let value: unknown;
      try {
        value = vault.open(sealed, boundTo(purpose, doc));
      } catch {
        counts.unreadable++;
        if (report.unreadable_values.length < 20) report.unreadable_values.push(`${collection.collectionName}/${String(doc._id)}.${field}`);
        continue;
      }
      const updated = await collection.updateOne(
        { _id: doc._id, [`${field}.kid`]: sealed.kid, [`${field}.iv`]: sealed.iv },
        { $set: { [field]: vault.seal(value, boundTo(purpose, doc)) } },
      );
      if (updated.modifiedCount === 1) counts.resealed++;
      else counts.changed_meanwhile++;
    }
    for (const k of Object.keys(counts) as (keyof FieldCounts)[]) report[k] += counts[k];
  }
  return report;
}

/**
 * Key files of a data dir (no XFER_MASTER_KEY): makes a new active key, the current one retired.
 * The old key is appended to the retired file (and synced) before master.key is replaced by an
 * atomic rename, so a crash at any point leaves every key that sealed something on disk.
 * Returns the key ids.
 */
export function generateMasterKeyFile(dataDir: string): { active: string; retired: string } {
  const files = keyFiles(dataDir);
  if (!existsSync(files.active)) throw new Error(`${files.active} does not exist: nothing to rotate`);
  const old = readFileSync(files.active, 'utf8').trim();
  const oldKey = Buffer.from(old, 'base64');
  if (oldKey.length !== 32) throw new Error(`${files.active} does not hold a 32-byte base64 key`);
  appendFileSync(files.retired, `${old}\n`, { mode: 0o600 });
  chmodSync(files.retired, 0o600);
  const key = randomBytes(32);
  const tmp = `${files.active}.${process.pid}.tmp`;
  writeFileSync(tmp, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  renameSync(tmp, files.active);
  return { active: keyId(key), retired: keyId(oldKey) };
}

/**
 * How long after an instance switched keys a value it sealed under the old one may still be on its
 * way to the database (sealed, not yet written): a drop waits this long after a switch before it
 * counts the values. A seal is followed by its write at once; this covers a slow database.
 */
export const IN_FLIGHT_MS = 10_000;

export interface DropReport {
  retired_keys_dropped: boolean;
  /** Live instances (models/instance.model.ts) still sealing under a key to be dropped. */
  instances_on_retired: { id: string; active_kid: string }[];
  /** Values under a key to be dropped, counted after the pass (sealed meanwhile). */
  values_on_retired: number;
}

/**
 * Removes the retired key file (key files of a data dir), after a pass of `resealAll` that left
 * nothing, unless a key in it is still in use: by a live instance (its heartbeat names it as its
 * active key: it has not yet noticed the new master.key, and would seal under a dropped key), or
 * by a value (sealed by such an instance after the pass read its record). Both are checked after
 * the pass, the instances first: an instance reports its new key only after it switched, so what
 * it sealed under the old key is in the database by the time the values are counted, once the
 * writes in flight at its switch have landed: an instance that switched from a key to be dropped
 * less than IN_FLIGHT_MS ago is waited for (`log` says so) before the count.
 */
export async function dropRetiredKeys(db: Models, dataDir: string, log: (line: string) => void = () => {}, now = new Date()): Promise<DropReport> {
  const files = keyFiles(dataDir);
  const report: DropReport = { retired_keys_dropped: false, instances_on_retired: [], values_on_retired: 0 };
  if (!existsSync(files.retired)) return report;
  const active = existsSync(files.active) ? keyId(Buffer.from(readFileSync(files.active, 'utf8').trim(), 'base64')) : null;
  const kids = [...new Set(readRetiredKeyFile(files.retired).map(keyId))].filter((k) => k !== active);
  const live = await db.instances.find({ live_until: { $gt: now }, active_kid: { $in: kids } }, { _id: 1, active_kid: 1 }).sort({ _id: 1 }).lean();
  report.instances_on_retired = live.map((i) => ({ id: i._id, active_kid: i.active_kid }));
  if (live.length > 0) return report;
  const switching = await db.instances.find(
    { live_until: { $gt: now }, switched_from: { $in: kids }, switched_at: { $gt: new Date(now.getTime() - IN_FLIGHT_MS) } }, { _id: 1, switched_at: 1 },
  ).lean();
  const settled = Math.max(0, ...switching.map((i) => i.switched_at!.getTime() + IN_FLIGHT_MS - Date.now()));
  if (settled > 0) {
    log(`waiting ${Math.ceil(settled / 1000)} s for what ${switching.map((i) => i._id).join(', ')} sealed before switching keys to reach the database`);
    await new Promise((resolve) => setTimeout(resolve, settled));
  }
  for (const { model, field } of SEALED_FIELDS) report.values_on_retired += await db[model].collection.countDocuments({ [`${field}.kid`]: { $in: kids } });
  if (report.values_on_retired > 0) return report;
  rmSync(files.retired);
  report.retired_keys_dropped = true;
  return report;
}
