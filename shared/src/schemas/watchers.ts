import { Type, type Static } from '@sinclair/typebox';
import { AutomationOwner, Id, Name, PageQuery, StringEnum, Timestamp } from './common.js';
import { JobOptions } from '../protocol/agent-protocol.js';
import { MAX_TRANSFER_PATH_LENGTH, TransferOptionsInput } from './transfers.js';

/** Bounds of a watcher's timing (scope-areas.md "Watchers"). */
export const MIN_POLL_INTERVAL_SECONDS = 10;
export const MAX_POLL_INTERVAL_SECONDS = 86_400;
export const DEFAULT_POLL_INTERVAL_SECONDS = 60;
export const DEFAULT_STABLE_SECONDS = 10;

/**
 * What became of a file version a watcher saw: its transfer's status while it has one;
 * `pending` until the action was started; `failed` also when no transfer could be created (the
 * reason in `error`); `unknown` once its transfer has been deleted.
 */
export const WATCHER_EVENT_STATUSES = ['pending', 'queued', 'in-progress', 'completed', 'failed', 'cancelled', 'unknown'] as const;
export type WatcherEventStatus = (typeof WATCHER_EVENT_STATUSES)[number];

/** The transfer a watcher creates for each new file version: from the watcher's connection to this destination. */
export const WatcherTransfer = Type.Object({
  destinationConnectionId: Id,
  /** A template (docs/automation.md "Templates"): `{{file.name}}`, `{{file.path}}`, `{{params.X}}`, `{{date:…}}`, `{{run.id}}`. */
  destinationPath: Type.String(),
  options: JobOptions,
});
export type WatcherTransfer = Static<typeof WatcherTransfer>;

/** A watcher as every read shows it (scope-areas.md "Watchers"). */
export const Watcher = Type.Object({
  id: Id,
  name: Type.String(),
  connectionId: Id,
  /** The watched folder, relative to the connection's base path. */
  path: Type.String(),
  /** A glob on the file name (docs/agent.md "Watching a folder"). */
  pattern: Type.String(),
  recursive: Type.Boolean(),
  poll_interval_seconds: Type.Integer(),
  stable_seconds: Type.Integer(),
  include_existing: Type.Boolean(),
  active: Type.Boolean(),
  action: Type.Object({
    transfer: Type.Union([WatcherTransfer, Type.Null()]),
    workflowId: Type.Union([Id, Type.Null()]),
  }),
  /** The agent polling it now; null while none that may is online. */
  agent_id: Type.Union([Id, Type.Null()]),
  /** When the last poll without error started; null before the first. */
  last_poll_at: Type.Union([Timestamp, Type.Null()]),
  /** Why the last poll failed; null when it did not. */
  last_error: Type.Union([Type.String(), Type.Null()]),
  /** Whose authority it runs with: who last saved it (read-only; docs/security.md "Escalation rules"). */
  owner: AutomationOwner,
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Watcher = Static<typeof Watcher>;

/** One file version a watcher saw and acted on (GET /watchers/:id/events, newest first). */
export const WatcherEvent = Type.Object({
  id: Id,
  watcher_id: Id,
  /** Relative to the connection's base path. */
  path: Type.String(),
  size: Type.Integer(),
  modified_at: Type.Union([Timestamp, Type.Null()]),
  /** The version's identity (`etag:…` or `size:…:mtime:…`). */
  version: Type.String(),
  seen_at: Timestamp,
  action_status: StringEnum(WATCHER_EVENT_STATUSES),
  transfer_id: Type.Union([Id, Type.Null()]),
  workflow_run_id: Type.Union([Id, Type.Null()]),
  /** Why its action failed; null otherwise. */
  error: Type.Union([Type.String(), Type.Null()]),
});
export type WatcherEvent = Static<typeof WatcherEvent>;

const TemplatePath = Type.String({ minLength: 1, maxLength: MAX_TRANSFER_PATH_LENGTH });

/** The `action.transfer` of a create or update. */
export const WatcherTransferInput = Type.Object(
  {
    destinationConnectionId: Type.String({ minLength: 1, maxLength: 64 }),
    destinationPath: TemplatePath,
    options: Type.Optional(TransferOptionsInput),
  },
  { additionalProperties: false },
);
export type WatcherTransferInput = Static<typeof WatcherTransferInput>;

/** `action`: exactly one of `transfer` and `workflowId`. */
export const WatcherActionInput = Type.Object(
  {
    transfer: Type.Optional(WatcherTransferInput),
    workflowId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  },
  { additionalProperties: false },
);
export type WatcherActionInput = Static<typeof WatcherActionInput>;

/** POST /watchers. Bounds are checked by the service, so that the error names the field as a user wrote it. */
export const CreateWatcherRequest = Type.Object(
  {
    name: Name,
    connectionId: Type.String({ minLength: 1, maxLength: 64 }),
    path: Type.String({ maxLength: MAX_TRANSFER_PATH_LENGTH }),
    pattern: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    recursive: Type.Optional(Type.Boolean()),
    poll_interval_seconds: Type.Optional(Type.Integer()),
    stable_seconds: Type.Optional(Type.Integer()),
    include_existing: Type.Optional(Type.Boolean()),
    active: Type.Optional(Type.Boolean()),
    action: WatcherActionInput,
  },
  { additionalProperties: false },
);
export type CreateWatcherRequest = Static<typeof CreateWatcherRequest>;

/** PUT /watchers/:id: the fields given change; a given `action` replaces the whole action. */
export const UpdateWatcherRequest = Type.Partial(CreateWatcherRequest, { additionalProperties: false });
export type UpdateWatcherRequest = Static<typeof UpdateWatcherRequest>;

export const ListWatchersQuery = Type.Composite([PageQuery], { additionalProperties: false });
export type ListWatchersQuery = Static<typeof ListWatchersQuery>;

export const ListWatcherEventsQuery = Type.Composite([PageQuery], { additionalProperties: false });
export type ListWatcherEventsQuery = Static<typeof ListWatcherEventsQuery>;
