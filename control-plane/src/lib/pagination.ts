import { Types, type Model } from 'mongoose';
import type { Page } from '@xfer/shared';
import { BadRequestError } from '../errors.js';

/** Opaque cursor: the last returned id, base64url, so clients cannot depend on its form. */
function encodeCursor(id: Types.ObjectId): string {
  return Buffer.from(id.toHexString(), 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): Types.ObjectId {
  const hex = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[0-9a-f]{24}$/.test(hex)) throw new BadRequestError('cursor is not a cursor returned by this list');
  return new Types.ObjectId(hex);
}

/**
 * How long one page may take the database. A page no index serves (a substring search on the
 * embedded FerretDB, which sorts and filters in its own process) grows with the collection: past
 * this it is stopped and answered 503 naming the cause, rather than holding a request and a
 * database connection until the socket times out.
 */
export const LIST_MAX_TIME_MS = 20_000;

/** MongoDB's and FerretDB's error code for an operation stopped by its maxTimeMS. */
export const MAX_TIME_EXPIRED = 50;

/**
 * Newest-first page of `model` matching `filter`, keyed on `_id` (unique and fixed at insert),
 * so paging is stable while documents are inserted concurrently.
 */
export async function paginate<Doc, Out>(
  model: Model<Doc>,
  filter: Record<string, unknown>,
  query: { limit?: number; cursor?: string },
  present: (doc: Doc & { _id: Types.ObjectId }) => Out,
  opts: { maxTimeMs?: number } = {},
): Promise<Page<Out>> {
  const limit = query.limit ?? 50;
  const where = query.cursor ? { ...filter, _id: { $lt: decodeCursor(query.cursor) } } : filter;
  const docs = (await model.find(where).sort({ _id: -1 }).limit(limit + 1).maxTimeMS(opts.maxTimeMs ?? LIST_MAX_TIME_MS)
    .lean().exec()) as Array<Doc & { _id: Types.ObjectId }>;
  const page = docs.slice(0, limit);
  const last = page[page.length - 1];
  return { data: page.map(present), next_cursor: docs.length > limit && last ? encodeCursor(last._id) : null };
}

/** `page` with each item presented: a service pages stored documents, its route presents them. */
export function mapPage<In, Out>(page: Page<In>, present: (item: In) => Out): Page<Out> {
  return { data: page.data.map(present), next_cursor: page.next_cursor };
}

/** Parses a path id; malformed ids are simply not found (never reveal anything about them). */
export function toObjectId(id: string): Types.ObjectId | null {
  return /^[0-9a-fA-F]{24}$/.test(id) ? new Types.ObjectId(id) : null;
}
