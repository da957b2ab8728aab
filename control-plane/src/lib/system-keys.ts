import { randomBytes } from 'node:crypto';
import type { Models } from '../models/index.js';
import { boundTo } from './sealed-fields.js';
import type { Sealed, Vault } from './vault.js';
import { isDuplicateKey } from './duplicate-key.js';

/**
 * Keys of the installation that every instance must share: `session` signs console sessions
 * (unless XFER_SESSION_KEY is set), `audit` keys the audit chain's hashes (lib/audit-chain.ts).
 */
export type SystemKey = 'session' | 'audit';

const binding = (id: SystemKey) => boundTo('system.key', { _id: id, account_id: 'system' });

/**
 * 32 random bytes made by the first instance to start, kept in the database (`system_keys`)
 * sealed by the vault, so every instance on the database uses the same key (one insert wins:
 * `_id` is unique), and rotating the master key re-seals it without changing it.
 */
export async function systemKeyOf(db: Models, vault: Vault, id: SystemKey): Promise<Buffer> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const doc = await db.systemKeys.findById(id).lean();
    if (doc) {
      try {
        return Buffer.from(vault.open<string>(doc.key as Sealed, binding(id)), 'base64');
      } catch (err) {
        throw new Error(`The ${id} key kept in the database does not open with the configured master keys (${(err as Error).message}): configure the master key that sealed it (XFER_RETIRED_MASTER_KEYS)${id === 'session' ? ', set XFER_SESSION_KEY, or replace it with `xfer-server rotate-keys --session`' : ''}`);
      }
    }
    try {
      await db.systemKeys.create({ _id: id, account_id: 'system', key: vault.seal(randomBytes(32).toString('base64'), binding(id)) });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }
  throw new Error(`the ${id} key could not be read back after it was stored`);
}

/** Replaces the session key: every session signed with the old one ends once the instances restart. */
export async function replaceSessionKey(db: Models, vault: Vault): Promise<void> {
  await db.systemKeys.updateOne(
    { _id: 'session' },
    { $set: { account_id: 'system', key: vault.seal(randomBytes(32).toString('base64'), binding('session')), created_at: new Date() } },
    { upsert: true },
  );
}
