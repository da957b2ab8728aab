import { Flags } from '@oclif/core';
import type { Page, PageIterator } from '@xfer/shared';

/** Flags of every list: one page (`--limit`, `--cursor`) or all of them (`--all`). */
export const listFlags = {
  limit: Flags.integer({ description: 'Items per page (1-1000)', min: 1, max: 1000 }),
  cursor: Flags.string({ description: 'Cursor of the page to show (next_cursor of the previous one)', exclusive: ['all'] }),
  all: Flags.boolean({ description: 'Follow next_cursor through every page' }),
};

/** One page's items, or every page's with `all`. */
export async function listItems<T, Q>(
  resource: { list(q: Q): Promise<Page<T>>; all(q: Q): PageIterator<T> },
  flags: { limit?: number; cursor?: string; all: boolean },
  query: Q,
): Promise<T[]> {
  const paging = { ...query, limit: flags.limit, cursor: flags.cursor };
  return flags.all ? resource.all(paging).toArray() : (await resource.list(paging)).data;
}
