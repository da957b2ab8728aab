import type { Deleted, Page, PageQuery } from '../schemas/common.js';
import { PageIterator } from './paging.js';
import type { CallOptions, CallSettings, QueryValue, Transport } from './transport.js';

/** The create answers that carry a one-time secret also carry a `warning` to show with it. */
export interface Warned<T> {
  data: T;
  warning: string | undefined;
}

/** Query of a list: its filters plus `limit` and `cursor`. */
export type ListQuery<Q = object> = Q & PageQuery;

/** An id as one path segment, whatever it contains. */
export const seg = (id: string) => encodeURIComponent(id);

/** What every resource group shares: `data` of a call, a page, every page. */
export abstract class Resource {
  constructor(protected readonly t: Transport) {}

  protected async data<T>(method: string, path: string, options?: CallOptions): Promise<T> {
    return (await this.t.envelope<T>(method, path, options)).data;
  }

  protected async warned<T>(method: string, path: string, options?: CallOptions): Promise<Warned<T>> {
    const { data, warning } = await this.t.envelope<T>(method, path, options);
    return { data, warning };
  }

  protected remove(path: string, settings?: CallSettings): Promise<Deleted> {
    return this.data<Deleted>('DELETE', path, settings);
  }

  protected async page<T>(path: string, query: object | undefined, settings?: CallSettings): Promise<Page<T>> {
    const { data, next_cursor } = await this.t.envelope<T[]>('GET', path, { ...settings, query: query as Record<string, QueryValue> });
    return { data, next_cursor: next_cursor ?? null };
  }

  /** Every item from the first page on; `limit` sets the page size, a given `cursor` is the start. */
  protected pager<T>(path: string, query: object | undefined, settings?: CallSettings): PageIterator<T> {
    const start = (query as PageQuery | undefined)?.cursor;
    return new PageIterator<T>((cursor) => this.page<T>(path, { ...query, cursor: cursor ?? start }, settings));
  }
}
