import type { Page } from '../schemas/common.js';

/** Fetches the page after `cursor` (undefined: the first). */
export type PageFetcher<T> = (cursor: string | undefined) => Promise<Page<T>>;

/**
 * Every item of a list, fetched a page at a time by following `next_cursor` until it is null.
 * Iterate it with `for await`, or collect it with `toArray()`; nothing is fetched before that.
 */
export class PageIterator<T> implements AsyncIterable<T> {
  constructor(private readonly fetchPage: PageFetcher<T>) {}

  /** The pages themselves, for callers that show progress or stop early between pages. */
  async *pages(): AsyncGenerator<Page<T>> {
    let cursor: string | undefined;
    do {
      const page = await this.fetchPage(cursor);
      yield page;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for await (const page of this.pages()) yield* page.data;
  }

  /** Every item in one array: for lists known to be small. */
  async toArray(): Promise<T[]> {
    const items: T[] = [];
    for await (const item of this) items.push(item);
    return items;
  }
}
