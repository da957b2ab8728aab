import { renameSync, writeFileSync, appendFileSync, chmodSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Models } from '../models/index.js';
import { SEALED_FIELDS, boundTo } from './sealed-fields.js';
import { keyFiles, keyId, type Sealed, type Vault } from './vault.js';

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

/** Removes the retired key file once nothing is sealed under a retired key. */
export function dropRetiredKeyFile(dataDir: string): boolean {
  const { retired } = keyFiles(dataDir);
  if (!existsSync(retired)) return false;
  rmSync(retired);
  return true;
}
