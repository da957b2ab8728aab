import type { Types } from 'mongoose';
import type { Models } from '../../../models/index.js';
import { BadRequestError } from '../../../errors.js';
import { toObjectId } from '../../../lib/pagination.js';

/**
 * The id of a connection of the account that a body names (a schedule's, watcher's or workflow
 * step's), or a 400 naming `field`: `<field>: connection <id> not found` for an unknown, a
 * malformed and another account's id alike.
 */
export async function ownedConnectionId(db: Models, accountId: string | Types.ObjectId, field: string, id: string): Promise<Types.ObjectId> {
  const _id = toObjectId(id);
  const found = _id && await db.connections.exists({ _id, account_id: accountId });
  if (!found || !_id) throw new BadRequestError(`${field}: connection ${id} not found`);
  return _id;
}
