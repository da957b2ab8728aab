import type { Types } from 'mongoose';
import type { Role, User } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { UserDoc } from '../../../models/user.model.js';
import type { Principal } from './auth.service.js';
import { ConflictError, ForbiddenError } from '../../../errors.js';

export const LAST_OWNER = 'An account must keep at least one owner';

/** A user as the API shows it: never the password hash or session cut-off. */
export function presentUser(doc: UserDoc & { _id: Types.ObjectId }): User {
  return {
    id: String(doc._id),
    email: doc.email,
    name: doc.name,
    role: doc.role as Role,
    created_at: doc.created_at.toISOString(),
    last_login_at: doc.last_login_at ? doc.last_login_at.toISOString() : null,
  };
}

/**
 * The role whose power a caller manages users with. A session acts with its user's role. An API
 * key holding users:write acts as an admin, never as an owner: a key is a shared, long-lived
 * credential, so owner-only actions (creating, promoting, changing or deleting owners) need an
 * owner's console session.
 */
export function actingRole(principal: Principal): Role {
  return principal.kind === 'session' && principal.role ? principal.role : 'admin';
}

/** Refuses owner-only changes to callers that are not owners (403 names the rule). */
export function requireOwnerFor(principal: Principal, what: string): void {
  if (actingRole(principal) === 'owner') return;
  const who = principal.kind === 'api_key' ? 'an API key (keys act with admin power)' : `your role (${principal.role})`;
  throw new ForbiddenError(`Only an owner can ${what}; the request was made by ${who}`);
}

const countOwners = (db: Models, accountId: Types.ObjectId | string) => db.users.countDocuments({ account_id: accountId, role: 'owner' });

/**
 * Runs `change`, which removes one owner (a demotion or a delete), without ever leaving the
 * account ownerless. There are no transactions (FerretDB), so two owners demoting each other at
 * once could both pass a check made before the change: the count is made again after it, and
 * a change that left no owner is undone by `undo` and answered 409.
 */
export async function withoutLosingLastOwner<T>(
  db: Models,
  accountId: Types.ObjectId | string,
  change: () => Promise<T>,
  undo: () => Promise<void>,
): Promise<T> {
  if ((await countOwners(db, accountId)) <= 1) throw new ConflictError(LAST_OWNER);
  const result = await change();
  if ((await countOwners(db, accountId)) === 0) {
    await undo();
    throw new ConflictError(LAST_OWNER);
  }
  return result;
}
