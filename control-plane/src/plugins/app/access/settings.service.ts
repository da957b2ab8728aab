import { Types } from 'mongoose';
import { planHasTeamFeatures, type Plan } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import { ConflictError, ForbiddenError, NotFoundError } from '../../../errors.js';
import type { AuditBy, AuditService, RequestAuditEntry } from './audit.service.js';
import type { ConsoleUser } from './auth.service.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

/** Where a setting lives: the account (userId null) or one user of it. */
export interface SettingOwner {
  accountId: string;
  userId: string | null;
}

/** A setting's value and when it last changed. */
export interface StoredSetting<T> {
  value: T;
  updated_at: Date;
}

/** What the settings service needs. */
export interface SettingsServiceOptions {
  db: Models;
  audit: AuditService;
}

/** The `setting.update` audit entry of a change (values are ids, flags and counts, never secrets). */
export function settingEntry(setting: string, scope: 'user' | 'account', details: Record<string, unknown>): RequestAuditEntry {
  return { action: 'setting.update', outcome: 'success', resource: { type: 'setting', id: setting }, details: { scope, ...details } };
}

/**
 * Console settings (decisions.md "Accounts, users, sessions, plans"): settings documents
 * (models/setting.model.ts, one per owner and name, replaced as a whole), who may change the
 * account's, and the user's sessions. Every change is recorded write-ahead (audit.service.ts
 * `change`).
 */
export class SettingsService {
  private readonly db: Models;
  private readonly audit: AuditService;

  constructor(opts: SettingsServiceOptions) {
    this.db = opts.db;
    this.audit = opts.audit;
  }

  /** The setting `name` of `owner`, null when never set. */
  async get<T>(owner: SettingOwner, name: string): Promise<StoredSetting<T> | null> {
    const doc = await this.db.settings.findOne({ account_id: owner.accountId, user_id: owner.userId, name }).lean();
    return doc ? { value: doc.value as T, updated_at: doc.updated_at } : null;
  }

  /** Replaces the setting `name` of `owner`, its audit record written ahead. */
  put<T>(by: AuditBy, owner: SettingOwner, name: string, value: T, details: Record<string, unknown>): Promise<StoredSetting<T>> {
    return this.change(by, name, owner.userId === null ? 'account' : 'user', details, () => this.store(owner, name, value));
  }

  /**
   * Account settings change with owner or admin power only (decisions.md: members and viewers
   * have no account settings). A refusal is audited before the 403.
   */
  async requireAccountAdmin(user: ConsoleUser, by: AuditBy, setting: string): Promise<void> {
    if (user.role === 'owner' || user.role === 'admin') return;
    await this.audit.recordRequest(by, {
      action: 'setting.update', outcome: 'denied', resource: { type: 'setting', id: setting }, details: { reason: `role ${user.role}` },
    });
    throw new ForbiddenError(`Your role (${user.role}) cannot change account settings; an owner or admin can`);
  }

  /** The account's plan, and when an owner last changed it (null: as bootstrapped). */
  async plan(accountId: string): Promise<{ plan: Plan; updated_at: Date | null }> {
    const account = await this.db.accounts.findById(accountId, { plan: 1, plan_updated_at: 1 }).lean();
    if (!account) throw new NotFoundError('Account not found');
    return { plan: account.plan as Plan, updated_at: account.plan_updated_at ?? null };
  }

  /**
   * Changes the account's plan: an owner's session only (a refusal is audited before its 403).
   * Authentication reads the plan on every request, so the Team rules apply from the next one.
   * Going below Team is refused (409) while the account holds what needs Team: API keys besides
   * the bootstrap key (created by `system`), and webhooks. Recorded write-ahead as `setting.update`.
   */
  async changePlan(user: ConsoleUser, by: AuditBy, plan: Plan): Promise<{ plan: Plan; updated_at: Date | null }> {
    if (user.role !== 'owner') {
      await this.audit.recordRequest(by, {
        action: 'setting.update', outcome: 'denied', resource: { type: 'setting', id: 'plan' }, details: { reason: `role ${user.role}` },
      });
      throw new ForbiddenError(`Only an owner can change the plan; your role is ${user.role}`);
    }
    const current = await this.plan(user.accountId);
    if (current.plan === plan) return current;
    if (!planHasTeamFeatures(plan)) {
      const account = new Types.ObjectId(user.accountId);
      const now = new Date();
      const [keys, webhooks] = await Promise.all([
        this.db.apiKeys.countDocuments({
          account_id: account, revoked_at: null, 'created_by.type': { $ne: 'system' }, $or: [{ expires_at: null }, { expires_at: { $gt: now } }],
        }),
        this.db.webhooks.countDocuments({ account_id: account }),
      ]);
      if (keys > 0 || webhooks > 0) {
        throw new ConflictError(
          `Cannot change the plan to ${plan}: the account has ${keys} API key(s) and ${webhooks} webhook(s), which need the Team plan; revoke and delete them first`,
        );
      }
    }
    return this.change(by, 'plan', 'account', { plan_from: current.plan, plan_to: plan }, async () => {
      const updated = await this.db.accounts.findOneAndUpdate(
        // No projection: FerretDB 1.24's findAndModify does not implement `fields`.
        { _id: user.accountId }, { $set: { plan, plan_updated_at: new Date() } }, { new: true },
      ).lean();
      if (!updated) throw new NotFoundError('Account not found');
      return { plan: updated.plan as Plan, updated_at: updated.plan_updated_at ?? null };
    });
  }

  /** When the user's sessions issued before it stopped working (the epoch: never signed out). */
  async sessionsValidAfter(user: ConsoleUser): Promise<Date> {
    const doc = await this.db.users.findById(user.userId, { sessions_valid_after: 1 }).lean();
    if (!doc) throw new NotFoundError('User not found');
    return doc.sessions_valid_after;
  }

  /** Sign out everywhere: every session of the user issued up to `cutoff` stops working. */
  async signOutEverywhere(user: ConsoleUser, by: AuditBy, cutoff: Date): Promise<void> {
    await this.change(by, 'sessions', 'user', { sign_out_everywhere: true }, async () => {
      const updated = await this.db.users.updateOne({ _id: user.userId, account_id: user.accountId }, { $set: { sessions_valid_after: cutoff } });
      if (updated.matchedCount === 0) throw new NotFoundError('User not found');
    });
  }

  /** Makes a settings change with its audit record written ahead of it. */
  private change<T>(by: AuditBy, setting: string, scope: 'user' | 'account', details: Record<string, unknown>, apply: () => Promise<T>): Promise<T> {
    return this.audit.change(by, async (announce) => {
      await announce(settingEntry(setting, scope, details));
      return apply();
    });
  }

  private async store<T>(owner: SettingOwner, name: string, value: T): Promise<StoredSetting<T>> {
    const filter = { account_id: owner.accountId, user_id: owner.userId, name };
    const update = { $set: { value, updated_at: new Date() } };
    let doc;
    try {
      doc = await this.db.settings.findOneAndUpdate(filter, update, { upsert: true, new: true }).lean();
    } catch (err) {
      // Two first writes raced on the unique index: the loser's upsert is now a plain update.
      if (!isDuplicateKey(err)) throw err;
      doc = await this.db.settings.findOneAndUpdate(filter, update, { new: true }).lean();
    }
    return { value: doc!.value as T, updated_at: doc!.updated_at };
  }
}
