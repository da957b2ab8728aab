import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Messages, type Role } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import { ForbiddenError, UnauthorizedError } from '../../../errors.js';
import { principalOf } from './auth.plugin.js';
import type { RequestAuditEntry } from './audit.service.js';

/** Where a setting lives: the account (userId null) or one user of it. */
export interface SettingOwner {
  accountId: string;
  userId: string | null;
}

export interface StoredSetting<T> {
  value: T;
  updated_at: Date;
}

/** Settings documents (models/setting.model.ts): one per owner and name, replaced as a whole. */
export class SettingsStore {
  constructor(private readonly db: Models) {}

  async get<T>(owner: SettingOwner, name: string): Promise<StoredSetting<T> | null> {
    const doc = await this.db.settings.findOne({ account_id: owner.accountId, user_id: owner.userId, name }).lean();
    return doc ? { value: doc.value as T, updated_at: doc.updated_at } : null;
  }

  async put<T>(owner: SettingOwner, name: string, value: T): Promise<StoredSetting<T>> {
    const filter = { account_id: owner.accountId, user_id: owner.userId, name };
    const update = { $set: { value, updated_at: new Date() } };
    let doc;
    try {
      doc = await this.db.settings.findOneAndUpdate(filter, update, { upsert: true, new: true }).lean();
    } catch (err) {
      // Two first writes raced on the unique index: the loser's upsert is now a plain update.
      if ((err as { code?: number }).code !== 11000) throw err;
      doc = await this.db.settings.findOneAndUpdate(filter, update, { new: true }).lean();
    }
    return { value: doc!.value as T, updated_at: doc!.updated_at };
  }
}

/** The signed-in console user of a settings route (consoleOnly routes never see an API key). */
export interface ConsoleUser {
  accountId: string;
  userId: string;
  role: Role;
}

export function consoleUserOf(request: FastifyRequest): ConsoleUser {
  const principal = principalOf(request);
  if (principal.kind !== 'session' || !principal.userId || !principal.role) throw new UnauthorizedError(Messages.unauthenticated);
  return { accountId: principal.accountId, userId: principal.userId, role: principal.role };
}

/**
 * Account settings change with owner or admin power only (decisions.md: members and viewers
 * have no account settings). A refusal is audited before the 403.
 */
export async function requireAccountAdmin(app: FastifyInstance, request: FastifyRequest, setting: string): Promise<ConsoleUser> {
  const user = consoleUserOf(request);
  if (user.role === 'owner' || user.role === 'admin') return user;
  await app.audit.recordRequest(request, {
    action: 'setting.update', outcome: 'denied', resource: { type: 'setting', id: setting }, details: { reason: `role ${user.role}` },
  });
  throw new ForbiddenError(`Your role (${user.role}) cannot change account settings; an owner or admin can`);
}

/** The `setting.update` audit entry of a change (values are ids, flags and counts, never secrets). */
export function settingEntry(setting: string, scope: 'user' | 'account', details: Record<string, unknown>): RequestAuditEntry {
  return { action: 'setting.update', outcome: 'success', resource: { type: 'setting', id: setting }, details: { scope, ...details } };
}

/** Makes a settings change with its audit record written ahead of it (plugins/app/audit.ts `change`). */
export function auditedSettingChange<T>(
  app: FastifyInstance, request: FastifyRequest, setting: string, scope: 'user' | 'account', details: Record<string, unknown>, apply: () => Promise<T>,
): Promise<T> {
  return app.audit.change(request, async (announce) => {
    await announce(settingEntry(setting, scope, details));
    return apply();
  });
}

/** ISO string of a stored instant, null for "never" (unset or the epoch default). */
export const isoOrNull = (date: Date | null | undefined): string | null => (date && date.getTime() > 0 ? date.toISOString() : null);
