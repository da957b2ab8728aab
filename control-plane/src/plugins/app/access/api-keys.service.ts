import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import type { ApiKey, Actor, Scope } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { ApiKeyDoc } from '../../../models/api-key.model.js';
import { sha256Hex } from '../../../lib/crypto.js';

export interface IssueApiKey {
  accountId: Types.ObjectId | string;
  name: string;
  scopes: Scope[];
  expiresAt: Date | null;
  createdBy: Actor;
}

/** `svc_` + 32 random bytes base64url (43 characters). */
function newKey(): string {
  return `svc_${randomBytes(32).toString('base64url')}`;
}

/**
 * Creates a key and returns it in full, the only time it exists outside the caller's hands.
 * `beforeWrite` is called with what the audit record names right before the write
 * (plugins/app/audit.ts `change`).
 */
export async function issueApiKey(
  db: Models, input: IssueApiKey,
  beforeWrite: (id: string, details: { name: string; scopes: Scope[]; key_prefix: string }) => Promise<void> = async () => {},
): Promise<{ record: ApiKey; key: string }> {
  const key = newKey();
  const _id = new Types.ObjectId();
  await beforeWrite(String(_id), { name: input.name, scopes: input.scopes, key_prefix: `${key.slice(0, 12)}...` });
  const doc = await db.apiKeys.create({
    _id,
    account_id: input.accountId,
    name: input.name,
    key_hash: sha256Hex(key),
    key_prefix: `${key.slice(0, 12)}...`,
    scopes: input.scopes,
    created_by: input.createdBy,
    expires_at: input.expiresAt,
  });
  return { record: presentApiKey(doc.toObject()), key };
}

export function presentApiKey(doc: ApiKeyDoc & { _id: Types.ObjectId }): ApiKey {
  return {
    id: String(doc._id),
    name: doc.name,
    key_prefix: doc.key_prefix,
    scopes: [...doc.scopes],
    created_at: doc.created_at.toISOString(),
    expires_at: doc.expires_at ? doc.expires_at.toISOString() : null,
    last_used_at: doc.last_used_at ? doc.last_used_at.toISOString() : null,
    revoked_at: doc.revoked_at ? doc.revoked_at.toISOString() : null,
  };
}
