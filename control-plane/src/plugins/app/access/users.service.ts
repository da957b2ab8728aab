import { Types } from 'mongoose';
import type { CreateUserRequest, PageQuery, Role, UpdateUserRequest, User } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { UserDoc } from '../../../models/user.model.js';
import { hashPassword } from '../../../lib/crypto.js';
import { later, lastUsesOf } from '../../../models/last-use.model.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { ConflictError, ForbiddenError, NotFoundError } from '../../../errors.js';
import type { Outbox } from '../webhooks/index.js';
import type { AuditBy, AuditService } from './audit.service.js';
import type { Principal } from './auth.service.js';
import { requireRoleWithin, requireUserWithin } from './grant-rules.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

const LAST_OWNER = 'An account must keep at least one owner';

/** What the users service needs. */
export interface UsersServiceOptions {
  db: Models;
  audit: AuditService;
  /** Where `user.registered` is emitted. */
  outbox: Outbox;
}

/** A user as the API shows it: never the password hash or session cut-off. `lastLogin`: its `last_uses` record. */
export function presentUser(doc: UserDoc & { _id: Types.ObjectId }, lastLogin: Date | null = null): User {
  const lastLoginAt = later(doc.last_login_at, lastLogin);
  return {
    id: String(doc._id),
    email: doc.email,
    name: doc.name,
    role: doc.role as Role,
    created_at: doc.created_at.toISOString(),
    last_login_at: lastLoginAt ? lastLoginAt.toISOString() : null,
  };
}

/** The data of a `user.registered` event: the new user as the API shows it. */
function registeredEvent(user: User): Record<string, unknown> {
  return { id: user.id, email: user.email, name: user.name, role: user.role };
}

/**
 * The role whose power a caller manages users with. A session acts with its user's role. An API
 * key holding users:write acts as an admin, never as an owner: a key is a shared, long-lived
 * credential, so owner-only actions (creating, promoting, changing or deleting owners) need an
 * owner's console session.
 */
function actingRole(principal: Principal): Role {
  return principal.kind === 'session' && principal.role ? principal.role : 'admin';
}

/** Refuses owner-only changes to callers that are not owners (403 names the rule). */
function requireOwnerFor(principal: Principal, what: string): void {
  if (actingRole(principal) === 'owner') return;
  const who = principal.kind === 'api_key' ? 'an API key (keys act with admin power)' : `your role (${principal.role})`;
  throw new ForbiddenError(`Only an owner can ${what}; the request was made by ${who}`);
}

/**
 * Users of the caller's account.
 *
 * Rules: only an owner creates owners, promotes to owner, or changes or deletes an owner; an
 * account always keeps at least one owner (409); nobody deletes their own user (409). An API key
 * with users:write acts with admin power, never owner power (see `actingRole`). A caller gives,
 * changes or deletes only roles whose scopes it holds (grant-rules.ts). A password change
 * ends every session of that user (sessions_valid_after = now). Every refusal of a rule is
 * audited before its 403; every change is recorded write-ahead (audit.service.ts `change`).
 */
export class UsersService {
  private readonly db: Models;
  private readonly audit: AuditService;
  private readonly outbox: Outbox;

  constructor(opts: UsersServiceOptions) {
    this.db = opts.db;
    this.audit = opts.audit;
    this.outbox = opts.outbox;
  }

  /** The account's users, newest first, one page. */
  async list(accountId: string, query: PageQuery) {
    const users = await paginate(this.db.users, { account_id: accountId }, query, (doc) => doc as UserDoc & { _id: Types.ObjectId });
    return { data: await this.presentAll(accountId, users.data), next_cursor: users.next_cursor };
  }

  /** One user of the account (404 for another account's, like an unknown id). */
  async get(accountId: string, rawId: string): Promise<User> {
    return (await this.presentAll(accountId, [await this.find(accountId, rawId)]))[0]!;
  }

  /** Users as the API shows them, with their last sign-in (one read of `last_uses`: last-use.model.ts). */
  private async presentAll(accountId: string, docs: Array<UserDoc & { _id: Types.ObjectId }>): Promise<User[]> {
    const logins = await lastUsesOf(this.db.lastUses, new Types.ObjectId(accountId), docs.map((d) => d._id));
    return docs.map((d) => presentUser(d, logins.get(String(d._id)) ?? null));
  }

  /** Creates a user in the caller's account (409 for an email already used in any account); emits `user.registered`. */
  async create(principal: Principal, by: AuditBy, input: CreateUserRequest): Promise<User> {
    const { accountId } = principal;
    const { role, password } = input;
    if (role === 'owner') await this.ownerOnly(principal, by, 'user.create', null, 'create owners');
    await this.withinCaller(by, 'user.create', null, () => requireRoleWithin(principal, role, 'create'));
    const email = input.email.trim().toLowerCase();
    const conflict = () => new ConflictError(`A user with email ${email} already exists`);
    if (await this.db.users.exists({ email })) throw conflict();
    const _id = new Types.ObjectId();
    const passwordHash = await hashPassword(password);
    const doc = await this.audit.change(by, async (announce) => {
      await announce({ action: 'user.create', outcome: 'success', resource: { type: 'user', id: String(_id) }, details: { email, role } });
      try {
        return await this.db.users.create({
          _id,
          account_id: accountId,
          email,
          name: input.name?.trim() ?? email.split('@')[0]!,
          role,
          password_hash: passwordHash,
        });
      } catch (err) {
        if (isDuplicateKey(err)) throw conflict();
        throw err;
      }
    });
    const user = presentUser(doc.toObject());
    await this.outbox.emit(accountId, 'user.registered', registeredEvent(user));
    return user;
  }

  /** Renames a user, changes its role or password (which ends its sessions). */
  async update(principal: Principal, by: AuditBy, rawId: string, input: UpdateUserRequest): Promise<User> {
    const { accountId } = principal;
    const target = await this.find(accountId, rawId);
    const targetId = String(target._id);
    const { name, role, password } = input;
    if (target.role === 'owner') await this.ownerOnly(principal, by, 'user.update', targetId, 'change an owner');
    if (role === 'owner' && target.role !== 'owner') await this.ownerOnly(principal, by, 'user.update', targetId, 'promote a user to owner');
    await this.withinCaller(by, 'user.update', targetId, () => {
      requireUserWithin(principal, target.role as Role, 'change');
      if (role !== undefined) requireRoleWithin(principal, role, 'promote');
    });

    const now = new Date();
    const set: Record<string, unknown> = { updated_at: now };
    if (name !== undefined) set.name = name.trim();
    if (role !== undefined) set.role = role;
    if (password !== undefined) {
      set.password_hash = await hashPassword(password);
      set.sessions_valid_after = now;
    }
    const apply = () => this.db.users.findOneAndUpdate({ _id: target._id, account_id: accountId }, { $set: set }, { new: true }).lean();
    const updated = await this.audit.change(by, async (announce) => {
      await announce({
        action: 'user.update', outcome: 'success', resource: { type: 'user', id: targetId },
        details: {
          fields: Object.keys(input).sort(),
          ...(role !== undefined && role !== target.role ? { role_from: target.role, role_to: role } : {}),
          ...(password !== undefined ? { sessions_revoked: true } : {}),
        },
      });
      let result;
      if (target.role === 'owner' && role !== undefined && role !== 'owner') {
        // Undo puts back exactly the fields this request set, as they were before it.
        const before = Object.fromEntries(Object.keys(set).map((k) => [k, target[k as keyof typeof target]]));
        result = await this.withoutLosingLastOwner(accountId, apply, async () => {
          await this.db.users.updateOne({ _id: target._id }, { $set: before });
        });
      } else {
        result = await apply();
      }
      if (!result) throw new NotFoundError(`User ${rawId} not found`);
      return result;
    });
    return (await this.presentAll(accountId, [updated]))[0]!;
  }

  /** Deletes a user of the account, and its settings. */
  async delete(principal: Principal, by: AuditBy, rawId: string): Promise<{ id: string }> {
    const { accountId, userId } = principal;
    const target = await this.find(accountId, rawId);
    const targetId = String(target._id);
    if (userId === targetId) throw new ConflictError('You cannot delete your own user');
    await this.withinCaller(by, 'user.delete', targetId, () => requireUserWithin(principal, target.role as Role, 'delete'));
    const remove = async () => {
      const { deletedCount } = await this.db.users.deleteOne({ _id: target._id, account_id: accountId });
      if (deletedCount === 0) throw new NotFoundError(`User ${rawId} not found`);
    };
    if (target.role === 'owner') await this.ownerOnly(principal, by, 'user.delete', targetId, 'delete an owner');
    await this.audit.change(by, async (announce) => {
      await announce({ action: 'user.delete', outcome: 'success', resource: { type: 'user', id: targetId }, details: { email: target.email, role: target.role } });
      if (target.role === 'owner') {
        await this.withoutLosingLastOwner(accountId, remove, async () => {
          await this.db.users.create(target);
        });
      } else {
        await remove();
      }
    });
    await this.db.settings.deleteMany({ account_id: accountId, user_id: target._id });
    return { id: targetId };
  }

  private async find(accountId: string, rawId: string) {
    const id = toObjectId(rawId);
    const user = id && await this.db.users.findOne({ _id: id, account_id: accountId }).lean();
    if (!user) throw new NotFoundError(`User ${rawId} not found`);
    return user;
  }

  /** Runs a rule check whose refusal is written to the audit trail (with `reason`) before the 403. */
  private async audited(by: AuditBy, action: string, resourceId: string | null, reason: string, check: () => void): Promise<void> {
    try {
      check();
    } catch (err) {
      await this.audit.recordRequest(by, { action, outcome: 'denied', resource: { type: 'user', id: resourceId }, details: { reason } });
      throw err;
    }
  }

  private ownerOnly(principal: Principal, by: AuditBy, action: string, resourceId: string | null, what: string): Promise<void> {
    return this.audited(by, action, resourceId, `only an owner can ${what}`, () => requireOwnerFor(principal, what));
  }

  /** An escalation check (grant-rules.ts). */
  private withinCaller(by: AuditBy, action: string, resourceId: string | null, check: () => void): Promise<void> {
    return this.audited(by, action, resourceId, 'scope escalation', check);
  }

  /**
   * Runs `change`, which removes one owner (a demotion or a delete), without ever leaving the
   * account ownerless. There are no transactions (FerretDB), so two owners demoting each other at
   * once could both pass a check made before the change: the count is made again after it, and
   * a change that left no owner is undone by `undo` and answered 409.
   */
  private async withoutLosingLastOwner<T>(accountId: string, change: () => Promise<T>, undo: () => Promise<void>): Promise<T> {
    const countOwners = () => this.db.users.countDocuments({ account_id: accountId, role: 'owner' });
    if ((await countOwners()) <= 1) throw new ConflictError(LAST_OWNER);
    const result = await change();
    if ((await countOwners()) === 0) {
      await undo();
      throw new ConflictError(LAST_OWNER);
    }
    return result;
  }
}
