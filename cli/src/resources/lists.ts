import { Flags } from '@oclif/core';
import type { Page, PageIterator } from '@xfer/shared';
import { Messages } from '../messages.js';
import { TableWriter, type Column } from '../output.js';

/** Flags of every list: one page (`--limit`, `--cursor`) or all of them (`--all`). */
export const listFlags = {
  limit: Flags.integer({ description: 'Items per page (1-1000)', min: 1, max: 1000 }),
  cursor: Flags.string({ description: 'Cursor of the page to show (next_cursor of the previous one)', exclusive: ['all'] }),
  all: Flags.boolean({ description: 'Follow next_cursor through every page, printing each as it arrives' }),
};

/** What a list command pages through: one page, or every page from a start. */
export interface ListSource<T, Q> {
  list(q: Q): Promise<Page<T>>;
  all(q: Q): PageIterator<T>;
}

/** Where a list goes: `--json` or not, and stdout (or what stands for it). */
export interface ListOutput {
  json: boolean;
  stdout: NodeJS.WritableStream;
}

/** Writes, waiting while the reader is behind: a slow `| jq` must not make the output pile up here. */
async function write(stream: NodeJS.WritableStream, text: string): Promise<void> {
  if (!stream.write(text)) await new Promise<void>((resolve) => stream.once('drain', resolve));
}

/**
 * A list command's output. One page: returned (oclif prints it with `--json`) after its table.
 * `--all`: written page by page as the pages arrive, so memory holds one page however long the
 * list (a million files); the JSON array is the same text oclif would print for the whole array.
 * Returns undefined then, so oclif prints nothing more.
 */
export async function printList<T, Q>(
  source: ListSource<T, Q>,
  flags: { limit?: number; cursor?: string; all: boolean },
  query: Q,
  columns: readonly Column<T>[],
  out: ListOutput,
): Promise<T[] | undefined> {
  const paging = { ...query, limit: flags.limit, cursor: flags.cursor };
  if (!flags.all) {
    const { data } = await source.list(paging);
    if (!out.json) await write(out.stdout, (data.length > 0 ? new TableWriter(columns).page(data) : Messages.empty) + '\n');
    return data;
  }
  const tableWriter = new TableWriter(columns);
  let count = 0;
  for await (const page of source.all(paging).pages()) {
    if (page.data.length === 0) continue;
    const text = out.json
      // JSON.stringify(array, null, 2), an item at a time.
      ? (count === 0 ? '[\n' : ',\n') + page.data.map((item) => JSON.stringify(item, null, 2).replace(/^/gm, '  ')).join(',\n')
      : tableWriter.page(page.data) + '\n';
    await write(out.stdout, text);
    count += page.data.length;
  }
  if (out.json) await write(out.stdout, count === 0 ? '[]\n' : '\n]\n');
  else if (count === 0) await write(out.stdout, Messages.empty + '\n');
  return undefined;
}
