import { Types } from 'mongoose';
import { SCOPES, type Plan } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import { ConflictError } from '../../../errors.js';
import { hashPassword } from '../../../lib/crypto.js';
import { ChainWriter } from '../../../lib/audit-chain.js';
import { systemKeyOf } from '../../../lib/system-keys.js';
import type { Vault } from '../../../lib/vault.js';
import { ApiKeysService } from './api-keys.service.js';
import { AuditService } from './audit.service.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

/** The first account: its owner's email and password, its plan and name. */
export interface BootstrapInput {
  email: string;
  password: string;
  plan: Plan;
  accountName?: string;
}

/** What bootstrap made; `api_key` is shown this once. */
export interface BootstrapResult {
  account_id: string;
  user_id: string;
  api_key: string;
}

/**
 * Creates an account, its owner and an API key holding every scope: the operator's way in
 * before any console exists. The key is the account's root credential on every plan; creating
 * further keys through the API needs the Team plan. Its owner emits no `user.registered`: a new
 * account has no webhook that could receive it.
 */
export async function bootstrapAccount(db: Models, vault: Vault, input: BootstrapInput): Promise<BootstrapResult> {
  const email = input.email.trim().toLowerCase();
  if (!/^[^\s@]+@[^\s@]+$/.test(email)) throw new Error(`--email "${input.email}" is not an email address`);
  if (input.password.length < 12) throw new Error('--password must be at least 12 characters');
  if (await db.users.exists({ email })) throw new ConflictError(`A user with email ${email} already exists`);
  const passwordHash = await hashPassword(input.password);
  // Recorded write-ahead (docs/security.md "The audit chain"): ids first, the record, then the account.
  const account = { _id: new Types.ObjectId() };
  const userId = new Types.ObjectId();
  const entry = {
    account_id: account._id, actor: { type: 'system', id: null }, action: 'account.bootstrap', resource: { type: 'account', id: String(account._id) }, ip: null,
  };
  const chain = new ChainWriter(db.auditEvents.collection, await systemKeyOf(db, vault, 'audit'));
  const announced = await chain.append({
    timestamp: new Date(), ...entry, outcome: 'success', details: { plan: input.plan, owner: String(userId) },
  });
  try {
    await db.accounts.create({ _id: account._id, name: input.accountName ?? email, plan: input.plan });
    const user = await db.users.create({
      _id: userId, account_id: account._id, email, name: email.split('@')[0]!, role: 'owner', password_hash: passwordHash,
    });
    // Issued as the API issues keys; the bootstrap's own record (above) stands for it.
    const apiKeys = new ApiKeysService({ db, audit: new AuditService({ chain, log: console }) });
    const { key } = await apiKeys.issue({
      accountId: account._id, name: 'bootstrap', scopes: [...SCOPES], expiresAt: null, createdBy: { type: 'system', id: null },
    });
    return { account_id: String(account._id), user_id: String(user._id), api_key: key };
  } catch (err) {
    // No transactions (FerretDB): undo by hand so a failed bootstrap leaves no half account.
    await db.users.deleteMany({ account_id: account._id });
    await db.apiKeys.deleteMany({ account_id: account._id });
    await db.accounts.deleteOne({ _id: account._id });
    await chain.append({
      timestamp: new Date(), ...entry, outcome: 'failure', details: { announced: String(announced._id), reason: (err as Error).message },
    }).catch(() => {});
    if (isDuplicateKey(err)) throw new ConflictError(`A user with email ${email} already exists`);
    throw err;
  }
}
