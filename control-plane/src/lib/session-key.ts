import { randomBytes } from 'node:crypto';
import type { Models } from '../models/index.js';
import { boundTo } from './sealed-fields.js';
import type { Sealed, Vault } from './vault.js';

const SESSION = { _id: 'session', account_id: 'system' } as const;

const isDuplicateKey = (err: unknown) => (err as { code?: number }).code === 11000 || /E11000/.test(String((err as Error).message));

/**
 * The key signing console sessions when XFER_SESSION_KEY is not set: 32 random bytes made by the
 * first instance to start, kept in the database sealed by the vault, so every instance on the
 * database signs and checks with the same key (one insert wins: `_id` is unique), and rotating
 * the master key re-seals it without changing it (nobody is logged out).
 */
export async function sessionKeyOf(db: Models, vault: Vault): Promise<Buffer> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const doc = await db.systemKeys.findById(SESSION._id).lean();
    if (doc) {
      try {
        return Buffer.from(vault.open<string>(doc.key as Sealed, boundTo('system.key', doc)), 'base64');
      } catch (err) {
        throw new Error(`The session key kept in the database does not open with the configured master keys (${(err as Error).message}): configure the master key that sealed it (XFER_RETIRED_MASTER_KEYS), set XFER_SESSION_KEY, or replace it with \`xfer-server rotate-keys --session\``);
      }
    }
    try {
      await db.systemKeys.create({ ...SESSION, key: vault.seal(randomBytes(32).toString('base64'), boundTo('system.key', SESSION)) });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }
  throw new Error('the session key could not be read back after it was stored');
}

/** Replaces the session key: every session signed with the old one ends once the instances restart. */
export async function replaceSessionKey(db: Models, vault: Vault): Promise<void> {
  await db.systemKeys.updateOne(
    { _id: SESSION._id },
    { $set: { account_id: SESSION.account_id, key: vault.seal(randomBytes(32).toString('base64'), boundTo('system.key', SESSION)), created_at: new Date() } },
    { upsert: true },
  );
}
