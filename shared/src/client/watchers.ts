import type { Deleted, Page } from '../schemas/common.js';
import type {
  CreateWatcherRequest, ListWatcherEventsQuery, ListWatchersQuery, UpdateWatcherRequest, Watcher, WatcherEvent,
} from '../schemas/watchers.js';
import type { CallSettings } from './transport.js';
import type { PageIterator } from './paging.js';
import { Resource, seg } from './resource.js';

/** `/watchers`: a folder polled by the agent serving its connection; each new file version runs the action once. */
export class WatchersApi extends Resource {
  list(query?: ListWatchersQuery, s?: CallSettings): Promise<Page<Watcher>> { return this.page('/watchers', query, s); }
  all(query?: ListWatchersQuery, s?: CallSettings): PageIterator<Watcher> { return this.pager('/watchers', query, s); }
  get(id: string, s?: CallSettings): Promise<Watcher> { return this.data('GET', `/watchers/${seg(id)}`, s); }
  create(body: CreateWatcherRequest, s?: CallSettings): Promise<Watcher> { return this.data('POST', '/watchers', { ...s, json: body }); }
  /** Changes the fields given; a given `action` replaces the whole action. */
  update(id: string, body: UpdateWatcherRequest, s?: CallSettings): Promise<Watcher> {
    return this.data('PUT', `/watchers/${seg(id)}`, { ...s, json: body });
  }
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/watchers/${seg(id)}`, s); }
  /** The file versions the watcher saw and acted on, newest first. */
  events(id: string, query?: ListWatcherEventsQuery, s?: CallSettings): Promise<Page<WatcherEvent>> { return this.page(`/watchers/${seg(id)}/events`, query, s); }
  allEvents(id: string, query?: ListWatcherEventsQuery, s?: CallSettings): PageIterator<WatcherEvent> { return this.pager(`/watchers/${seg(id)}/events`, query, s); }
}
