import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import { isScope, Messages, type ApiKey, type Actor, type CreateApiKeyRequest, type ListApiKeysQuery, type Scope, type ServicePrincipal } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { ApiKeyDoc } from '../../../models/api-key.model.js';
import { later, lastUsesOf } from '../../../models/last-use.model.js';
import { sha256Hex } from '../../../lib/crypto.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { BadRequestError, ForbiddenError, NotFoundError } from '../../../errors.js';
import type { AuditBy, AuditService } from './audit.service.js';
import type { Principal } from './auth.service.js';
import { callerExpiresAt, requireExpiryWithin, requireKeyWithin } from './grant-rules.js';

/** A key to issue: its account, name, scopes, end of life and creator. */
export interface IssueApiKey {
  accountId: Types.ObjectId | string;
  name: string;
  scopes: Scope[];
  expiresAt: Date | null;
  createdBy: Actor;
  /** Client id of the registered service principal the key acts as. */
  servicePrincipal?: string | null;
}


/** What the API keys service needs. */
export interface ApiKeysServiceOptions {
  db: Models;
  audit: AuditService;
}

const DAY_MS = 24 * 3600 * 1000;
const MAX_LIFETIME_MS = 3650 * DAY_MS;

/** The requested end of life: `expires_at` or `expires_in_days` (not both), or null for none. */
function requestedExpiry(body: { expires_in_days?: number; expires_at?: string }, now: number): Date | null {
  if (body.expires_at !== undefined && body.expires_in_days !== undefined) {
    throw new BadRequestError('body.expires_at and body.expires_in_days cannot both be given');
  }
  if (body.expires_in_days !== undefined) return new Date(now + body.expires_in_days * DAY_MS);
  if (body.expires_at === undefined) return null;
  const at = new Date(body.expires_at);
  if (at.getTime() <= now) throw new BadRequestError('body.expires_at must be in the future');
  if (at.getTime() > now + MAX_LIFETIME_MS) throw new BadRequestError('body.expires_at must be within 3650 days');
  return at;
}

/** `svc_` + 32 random bytes base64url (43 characters). */
function newKey(): string {
  return `svc_${randomBytes(32).toString('base64url')}`;
}

/** A key as the API shows it: never its hash. `lastUse`: its `last_uses` record. */
export function presentApiKey(doc: ApiKeyDoc & { _id: Types.ObjectId }, lastUse: Date | null = null): ApiKey {
  const lastUsed = later(doc.last_used_at, lastUse);
  return {
    id: String(doc._id),
    name: doc.name,
    key_prefix: doc.key_prefix,
    scopes: [...doc.scopes],
    created_at: doc.created_at.toISOString(),
    expires_at: doc.expires_at ? doc.expires_at.toISOString() : null,
    last_used_at: lastUsed ? lastUsed.toISOString() : null,
    revoked_at: doc.revoked_at ? doc.revoked_at.toISOString() : null,
    service_principal: doc.service_principal ?? null,
  };
}

/** API keys of an account (docs/api.md "API keys"): listed, issued within the caller's scopes, revoked. */
export class ApiKeysService {
  private readonly db: Models;
  private readonly audit: AuditService;

  constructor(opts: ApiKeysServiceOptions) {
    this.db = opts.db;
    this.audit = opts.audit;
  }

  /** The account's keys that are not revoked (only one service principal's with `service_principal`), one page. */
  async list(accountId: string, query: ListApiKeysQuery) {
    const { service_principal: principal, ...page } = query;
    const filter = { account_id: accountId, revoked_at: null, ...(principal !== undefined ? { service_principal: principal } : {}) };
    const keys = await paginate(this.db.apiKeys, filter, page, (doc) => doc as ApiKeyDoc & { _id: Types.ObjectId });
    // One read of the page's last uses (last-use.model.ts: kept apart from the keys).
    const lastUse = await lastUsesOf(this.db.lastUses, new Types.ObjectId(accountId), keys.data.map((k) => k._id));
    return { data: keys.data.map((k) => presentApiKey(k, lastUse.get(String(k._id)) ?? null)), next_cursor: keys.next_cursor };
  }

  /** Whether `clientId` is a registered service principal of the account (`/settings/service-principals`). */
  private async isRegisteredPrincipal(accountId: string, clientId: string): Promise<boolean> {
    const doc = await this.db.settings.findOne({ account_id: accountId, user_id: null, name: 'service-principals' }, { value: 1 }).lean();
    return ((doc?.value ?? []) as ServicePrincipal[]).some((p) => p.client_id === clientId);
  }

  /**
   * Revokes every key issued for the service principals `clientIds` (they were removed from the
   * account's registrations), each revocation audited write-ahead; returns how many.
   */
  async revokeForPrincipals(by: AuditBy, accountId: string, clientIds: string[]): Promise<number> {
    if (clientIds.length === 0) return 0;
    const keys = await this.db.apiKeys.find(
      { account_id: accountId, service_principal: { $in: clientIds }, revoked_at: null }, { name: 1, key_prefix: 1, service_principal: 1 },
    ).lean();
    for (const key of keys) {
      await this.audit.change(by, async (announce) => {
        await announce({
          action: 'api_key.revoke', outcome: 'success', resource: { type: 'api_key', id: String(key._id) },
          details: { name: key.name, key_prefix: key.key_prefix, service_principal: key.service_principal, reason: 'service principal removed' },
        });
        await this.db.apiKeys.updateOne({ _id: key._id, account_id: accountId, revoked_at: null }, { $set: { revoked_at: new Date() } });
      });
    }
    return keys.length;
  }

  /**
   * Creates a key for the caller's account, within the caller's scopes and lifetime (no
   * escalation: docs/security.md "Escalation rules"); a refusal is audited before the 403.
   */
  /**
   * When what `principal` mints must end at the latest: its key's expiry, or null when it does
   * not expire (a session, a key without expiry). A grant it makes may not outlive it.
   */
  callerExpiresAt(principal: Principal): Promise<Date | null> {
    return callerExpiresAt(this.db, principal);
  }

  async create(principal: Principal, by: AuditBy, input: CreateApiKeyRequest): Promise<{ record: ApiKey; key: string }> {
    const { name, scopes } = input;
    const unknown = scopes.filter((s) => !isScope(s));
    if (unknown.length > 0) throw new BadRequestError(`scopes contains unknown scope: ${unknown.join(', ')}`);
    const beyond = (scopes as Scope[]).filter((s) => !principal.scopes.has(s));
    if (beyond.length > 0) {
      await this.audit.recordRequest(by, {
        action: 'api_key.create', outcome: 'denied', details: { name, reason: 'scope escalation', scopes: beyond },
      });
      throw new ForbiddenError(Messages.scopeEscalation);
    }
    const principalId = input.service_principal;
    if (principalId !== undefined && !(await this.isRegisteredPrincipal(principal.accountId, principalId))) {
      throw new BadRequestError(`body.service_principal is not a registered service principal: ${principalId}`);
    }
    const expiresAt = requestedExpiry(input, Date.now());
    try {
      requireExpiryWithin(await callerExpiresAt(this.db, principal), expiresAt, 'key');
    } catch (err) {
      await this.audit.recordRequest(by, {
        action: 'api_key.create', outcome: 'denied',
        details: { name, reason: 'expiry beyond the calling key', expires_at: expiresAt?.toISOString() ?? null },
      });
      throw err;
    }
    return this.audit.change(by, (announce) => this.issue({
      accountId: principal.accountId, name: name.trim(), scopes: scopes as Scope[], expiresAt, createdBy: principal.actor, servicePrincipal: principalId ?? null,
    }, (id, details) => announce({
      action: 'api_key.create', outcome: 'success', resource: { type: 'api_key', id },
      details: { ...details, ...(principalId !== undefined ? { service_principal: principalId } : {}) },
    })));
  }

  /**
   * Creates a key and returns it in full, the only time it exists outside the caller's hands.
   * `beforeWrite` is called with what the audit record names right before the write
   * (audit.service.ts `change`).
   */
  async issue(
    input: IssueApiKey,
    beforeWrite: (id: string, details: { name: string; scopes: Scope[]; key_prefix: string }) => Promise<void> = async () => {},
  ): Promise<{ record: ApiKey; key: string }> {
    const key = newKey();
    const _id = new Types.ObjectId();
    await beforeWrite(String(_id), { name: input.name, scopes: input.scopes, key_prefix: `${key.slice(0, 12)}...` });
    const doc = await this.db.apiKeys.create({
      _id,
      account_id: input.accountId,
      name: input.name,
      key_hash: sha256Hex(key),
      key_prefix: `${key.slice(0, 12)}...`,
      scopes: input.scopes,
      created_by: input.createdBy,
      expires_at: input.expiresAt,
      service_principal: input.servicePrincipal ?? null,
    });
    return { record: presentApiKey(doc.toObject()), key };
  }

  /** Revokes a key of the caller's account whose scopes the caller holds (404 otherwise; refusals audited). */
  async revoke(principal: Principal, by: AuditBy, rawId: string): Promise<{ id: string }> {
    const { accountId } = principal;
    const id = toObjectId(rawId);
    const target = id && await this.db.apiKeys.findOne({ _id: id, account_id: accountId, revoked_at: null }, { scopes: 1, name: 1, key_prefix: 1 }).lean();
    if (!target) throw new NotFoundError(`API key ${rawId} not found`);
    try {
      requireKeyWithin(principal, target.scopes);
    } catch (err) {
      await this.audit.recordRequest(by, {
        action: 'api_key.revoke', outcome: 'denied', resource: { type: 'api_key', id: String(target._id) },
        details: { name: target.name, reason: 'scope escalation', scopes: target.scopes.filter((s) => !principal.scopes.has(s as Scope)) },
      });
      throw err;
    }
    // A key's scopes never change, so the check above still holds for the update below.
    // Recorded write-ahead (audit.service.ts `change`).
    await this.audit.change(by, async (announce) => {
      await announce({ action: 'api_key.revoke', outcome: 'success', resource: { type: 'api_key', id: String(target._id) }, details: { name: target.name, key_prefix: target.key_prefix } });
      const revoked = await this.db.apiKeys.updateOne({ _id: target._id, account_id: accountId, revoked_at: null }, { $set: { revoked_at: new Date() } });
      if (revoked.modifiedCount !== 1) throw new NotFoundError(`API key ${rawId} not found`);
    });
    return { id: String(target._id) };
  }
}
