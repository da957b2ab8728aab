import { Type, type Static } from '@sinclair/typebox';
import { ConnectionSettings } from '../schemas/connections.js';
import { FilterOptions } from './job-options.js';

/**
 * Watchers over the agent protocol (scope-areas.md "Watchers"; docs/architecture.md "Watchers";
 * the poller is agent/src/watch/). The control plane tells each agent the whole set of watchers
 * it is to poll (`watch.set`, after every welcome and whenever the set changes); the agent polls
 * each every `poll_interval_seconds` through the connection's connector and reports the new
 * stable file versions (`watch.found`, numbered and kept until acknowledged like job reports)
 * and how each poll went (`watch.polled`). The control plane acts on each version once, whatever
 * agent reported it and however often: a version is `{watcher, path, version}` behind a unique index.
 */

/** Watchers one agent polls at most (the control plane assigns no more; `watch.set` stays far below MAX_FRAME_BYTES). */
export const MAX_WATCHERS_PER_AGENT = 200;
/**
 * How long a poll may say it took (`watch.polled.duration_ms`): a day. The control plane also
 * never dates a poll before it gave this session the watcher (docs/agent.md "Watching a folder").
 */
export const MAX_POLL_DURATION_MS = 86_400_000;
/** File versions one `watch.found` carries at most. */
export const MAX_FOUND_PER_REPORT = 1000;

const WatcherId = Type.String({ pattern: '^[0-9a-f]{24}$' });
/** An instant in ISO 8601 UTC (`Date#toISOString`); a pattern, since protocol frames are checked without format plug-ins. */
const Instant = Type.String({ maxLength: 40, pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?Z$' });

/** What a watcher watches, as the agent's `FolderWatch` takes it (agent/src/watch/folder-watch.ts `WatchSpec`). */
export const WatchSpec = Type.Object({
  /** The folder, relative to the connection's base path. */
  path: Type.String({ maxLength: 4096 }),
  /** A glob on the file name (docs/agent.md "Watching a folder"). */
  pattern: Type.String({ minLength: 1, maxLength: 1024 }),
  recursive: Type.Boolean(),
  stable_seconds: Type.Integer({ minimum: 0, maximum: 86_400 }),
  include_existing: Type.Boolean(),
  /**
   * The watcher's transfer options' `filters` (issue 25; docs/api.md "Filters"): a file they
   * exclude is not reported, a directory they prune is not listed. Paths are relative to `path`.
   * Absent: no filter (agents from before it ignore it).
   */
  filters: Type.Optional(FilterOptions),
});
export type WatchSpec = Static<typeof WatchSpec>;

/** One watcher an agent is to poll. */
export const AssignedWatcher = Type.Object({
  id: WatcherId,
  /**
   * Changes whenever what is watched changes (spec, connection): the agent then starts the
   * watcher over, and reports name the revision they were polled under (a report of an older
   * revision is still applied: its versions existed).
   */
  revision: Type.Integer({ minimum: 1 }),
  connection: ConnectionSettings,
  spec: WatchSpec,
  poll_interval_seconds: Type.Integer({ minimum: 10, maximum: 86_400 }),
  /**
   * Where the baseline ends, for an agent that has no state of this watcher (revision): on its
   * first listing, files modified at or after this time count as new, older ones are the
   * baseline (never reported). The control plane sends the watcher's creation time for a watcher
   * never polled (a file written between the create and the first listing is new), and a while
   * before its last poll for one polled before (by this agent before it restarted, or by
   * another): the versions reported twice are dropped by the control plane. When present,
   * `include_existing` is not looked at; absent, the first listing is the baseline, or everything
   * when `include_existing`.
   */
  report_since: Type.Optional(Instant),
  /**
   * With `report_since`: whether a file whose store gives no modification time (FTP without
   * MLSD) counts as new (true: the watcher was polled before, the control plane drops what it
   * has) or as baseline.
   */
  report_undated: Type.Optional(Type.Boolean()),
});
export type AssignedWatcher = Static<typeof AssignedWatcher>;

/** A new stable file version (agent/src/watch/folder-watch.ts `FileVersion`). */
export const FoundFile = Type.Object({
  /** Relative to the connection's base path, no leading slash. */
  path: Type.String({ minLength: 1, maxLength: 4096 }),
  name: Type.String({ minLength: 1, maxLength: 1024 }),
  size: Type.Integer({ minimum: 0 }),
  modified_at: Type.Optional(Instant),
  /** `etag:…` or `size:…:mtime:…` (docs/agent.md "Watching a folder", identity per type). */
  version: Type.String({ minLength: 1, maxLength: 512 }),
});
export type FoundFile = Static<typeof FoundFile>;

export const WatchServerToAgent = {
  /** The whole set of watchers this agent polls from now on; a watcher not in it is stopped and forgotten. */
  'watch.set': Type.Object({ watchers: Type.Array(AssignedWatcher, { maxItems: MAX_WATCHERS_PER_AGENT }) }),
} as const;

export const WatchAgentToServer = {
  /** New stable versions one poll of a watcher found, in listing order. Numbered (`seq`) and kept until acknowledged. */
  'watch.found': Type.Object({
    watcher_id: WatcherId,
    revision: Type.Integer({ minimum: 1 }),
    seq: Type.Optional(Type.Integer({ minimum: 1 })),
    files: Type.Array(FoundFile, { minItems: 1, maxItems: MAX_FOUND_PER_REPORT }),
  }),
  /**
   * A poll ended: what it saw, or why it failed (`error`; the next poll tries again). Not
   * numbered: the next poll's supersedes a lost one.
   */
  'watch.polled': Type.Object({
    watcher_id: WatcherId,
    revision: Type.Integer({ minimum: 1 }),
    /** When the poll's listing started (ISO 8601, the agent's clock). */
    started_at: Instant,
    duration_ms: Type.Integer({ minimum: 0, maximum: MAX_POLL_DURATION_MS }),
    listed: Type.Integer({ minimum: 0 }),
    matched: Type.Integer({ minimum: 0 }),
    reported: Type.Integer({ minimum: 0 }),
    waiting: Type.Integer({ minimum: 0 }),
    state_bytes: Type.Integer({ minimum: 0 }),
    error: Type.Optional(Type.String({ minLength: 1, maxLength: 2000 })),
  }),
} as const;
