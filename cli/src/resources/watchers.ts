import { Args, Flags } from '@oclif/core';
import type { UpdateWatcherRequest, Watcher, WatcherActionInput, WatcherEvent, WatcherTransfer, XferClient } from '@xfer/shared';
import type { Column } from '../output.js';
import { formatBytes } from '../progress/index.js';
import { connectionId, connectionIdOr, TRANSFER_OPTION_FLAGS, transferOptionFlags, transferOptions, type TransferOptionFlags } from './transfers.js';
import { workflowId } from './workflows.js';

export const watcherColumns: Column<Watcher>[] = [
  { header: 'id', get: (w) => w.id },
  { header: 'name', get: (w) => w.name },
  { header: 'path', get: (w) => w.path },
  { header: 'pattern', get: (w) => w.pattern },
  { header: 'active', get: (w) => w.active },
  { header: 'agent_id', get: (w) => w.agent_id },
  { header: 'last_poll_at', get: (w) => w.last_poll_at },
  { header: 'last_error', get: (w) => w.last_error },
];

export const watcherEventColumns: Column<WatcherEvent>[] = [
  { header: 'id', get: (e) => e.id },
  { header: 'seen_at', get: (e) => e.seen_at },
  { header: 'path', get: (e) => e.path },
  { header: 'size', get: (e) => formatBytes(e.size) },
  { header: 'status', get: (e) => e.action_status },
  { header: 'transfer_id', get: (e) => e.transfer_id },
  { header: 'error', get: (e) => e.error },
];

export const watcherIdArg = { id: Args.string({ description: 'Watcher id', required: true }) };

/**
 * What is watched and how often, named after the API's fields. The bounds (poll interval 10-86400,
 * stable 0-86400, a pattern without "/") are the server's: its 400 names the field.
 */
const watching = {
  pattern: Flags.string({ description: 'Glob on the file name, e.g. "*.csv" or "{a,b}-*.txt"; no "/": see --recursive (server default: *)' }),
  recursive: Flags.boolean({ description: 'Also watch the sub-folders (--no-recursive: the folder only, the default)', allowNo: true }),
  'poll-interval': Flags.integer({ description: 'Seconds between two listings of the folder, 10-86400 (server default: 60)' }),
  stable: Flags.integer({ description: 'Seconds a file must stay unchanged before it is acted on, 0-86400 (server default: 10)' }),
  'include-existing': Flags.boolean({ description: 'Also act on the files already there when the watcher starts (default: only files that arrive later)', allowNo: true }),
  active: Flags.boolean({ description: 'Poll the folder (--no-active: paused)', allowNo: true }),
};

const connectionDesc = { description: 'Connection whose folder is watched: its id or its name' };
const pathDesc = { description: "Folder to watch, starting with / (under the connection's base path)" };
const destDesc = { description: 'Where each new file goes: a connection id or name' };
const destPathDesc = { description: 'Directory on --dest each file is copied into, a template: e.g. "/in/{{date:YYYY-MM-DD}}" ({{file.name}}, {{file.path}} too)' };
const workflowDesc = { description: 'Run this workflow (its id or name) for each new file instead of a transfer; its steps see the file as {{file.name}} and {{file.path}}' };

/** The action flags: a transfer (`--dest`, `--dest-path` and the transfer options) or `--workflow`. */
const TRANSFER_FLAGS = ['dest', 'dest-path', ...TRANSFER_OPTION_FLAGS] as const;

export const watcherCreateFlags = {
  name: Flags.string({ description: 'Name of the watcher (and the start of the names of the transfers it creates)', required: true }),
  connection: Flags.string({ ...connectionDesc, required: true }),
  path: Flags.string({ ...pathDesc, required: true }),
  ...watching,
  dest: Flags.string({ ...destDesc, dependsOn: ['dest-path'] }),
  'dest-path': Flags.string({ ...destPathDesc, dependsOn: ['dest'] }),
  ...transferOptionFlags,
  workflow: Flags.string(workflowDesc),
};

export const watcherUpdateFlags = {
  name: Flags.string({ description: 'New name' }),
  connection: Flags.string(connectionDesc),
  path: Flags.string(pathDesc),
  ...watching,
  dest: Flags.string(destDesc),
  'dest-path': Flags.string(destPathDesc),
  ...transferOptionFlags,
  workflow: Flags.string(workflowDesc),
};

type WatchingFlags = {
  name?: string; connection?: string; path?: string; pattern?: string; recursive?: boolean;
  'poll-interval'?: number; stable?: number; 'include-existing'?: boolean; active?: boolean;
};
type ActionFlags = TransferOptionFlags & { dest?: string; 'dest-path'?: string; workflow?: string };

/** The watcher's own fields given (not its action); a connection name is looked up (GET /connections). */
export async function watchingInput(client: XferClient, f: WatchingFlags): Promise<Omit<UpdateWatcherRequest, 'action'>> {
  return {
    ...(f.name !== undefined && { name: f.name }),
    ...(f.connection !== undefined && { connectionId: await connectionId(client, f.connection) }),
    ...(f.path !== undefined && { path: f.path }),
    ...(f.pattern !== undefined && { pattern: f.pattern }),
    ...(f.recursive !== undefined && { recursive: f.recursive }),
    ...(f['poll-interval'] !== undefined && { poll_interval_seconds: f['poll-interval'] }),
    ...(f.stable !== undefined && { stable_seconds: f.stable }),
    ...(f['include-existing'] !== undefined && { include_existing: f['include-existing'] }),
    ...(f.active !== undefined && { active: f.active }),
  };
}

/** Whether a flag of the action's transfer was given. */
export const givesTransfer = (f: ActionFlags): boolean => TRANSFER_FLAGS.some((k) => f[k] !== undefined);

/** Whether any action flag was given (an update then sends the whole action). */
export const givesAction = (f: ActionFlags): boolean => givesTransfer(f) || f.workflow !== undefined;

/**
 * The `action` of a request from the flags given: the transfer flags over `current` (an update
 * changes only what they name, but the API replaces the whole action), and `--workflow`. Both
 * kinds given are sent as they are: the server's 400 says that the action has exactly one.
 */
export async function actionInput(client: XferClient, f: ActionFlags, current?: WatcherTransfer | null): Promise<WatcherActionInput> {
  const action: WatcherActionInput = {};
  if (givesTransfer(f)) {
    const options = transferOptions(f, current?.options);
    action.transfer = {
      destinationConnectionId: await connectionIdOr(client, f.dest, current?.destinationConnectionId),
      destinationPath: f['dest-path'] ?? current?.destinationPath ?? '',
      ...(options && { options }),
    };
  }
  if (f.workflow !== undefined) action.workflowId = await workflowId(client, f.workflow);
  return action;
}
