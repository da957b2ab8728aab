import type { AgentToServer, PayloadOf, ServerToAgent, SettleFile, SettleResult } from '@xfer/shared';
import { reasonOf } from '../copy/errors.js';
import { truncate } from '../copy/stats.js';
import { baseName, joinRel, parentOf, relativePath, shownPath } from '../connectors/paths.js';
import { ConnectorError, type Connector } from '../connectors/types.js';
import type { ConnectorSource } from '../lib/connector-source.js';

/** A `source.settle` request (settle-protocol.ts) without its id. */
export type SettleRequest = Omit<PayloadOf<typeof ServerToAgent, 'source.settle'>, 'request_id'>;
/** Its answer without the id: one result per file sent, or `error` (and no results) for the request as a whole. */
export type SettleReply = Omit<PayloadOf<typeof AgentToServer, 'source.settle.result'>, 'request_id'>;

export interface SettleOptions {
  /** Aborts the request: files not settled yet are answered `failed`. */
  signal?: AbortSignal;
  /** Bound on the whole request, honoured even when a connector ignores its signal (default: none). */
  timeoutMs?: number;
  /** Files settled at once (default 4). */
  concurrency?: number;
}

/** Files of one request settled at once: a few requests in flight on one connection, not a hundred. */
export const SETTLE_CONCURRENCY = 4;
const ERROR_CHARS = 2000;

/** Where the transfer's source path led: one file, a folder, or nothing any more. */
type SourceShape = { kind: 'file'; rel: string } | { kind: 'folder'; rel: string } | { kind: 'missing'; rel: string };

/**
 * Moves or deletes a transfer's verified source files (`source.settle`, settle-protocol.ts) and
 * says what became of each. Never rejects; closes the connector it opened; no message holds a
 * credential (connectors put none in their errors).
 *
 * `source_path` is stat-ed once: a file is the only file of the request (named by its base
 * name), a folder holds the files at `source_path/<path>`, and when it is gone each file is
 * `gone` (or `moved`, when its target holds it). A file path with an empty, `.` or `..` segment,
 * a backslash or a control character is refused before the store is touched. Each file is
 * checked first: missing → `moved` when the target holds the expected size (an earlier request
 * moved it), else `gone`; another size → `changed` (left alone); a folder → `failed`. A move
 * renames where the store can (creating the target's folder), else streams a copy to the target,
 * checks its size and only then removes the source (a failed copy removes nothing). A delete
 * removes the file. On stores without real folders (object stores), a key that also has keys
 * below it is refused (`failed`): the connector's remove would take those too.
 */
export async function settleSourceFiles(connectors: ConnectorSource, request: SettleRequest, options: SettleOptions = {}): Promise<SettleReply> {
  const controller = new AbortController();
  const stop = (reason: string) => { if (!controller.signal.aborted) controller.abort(new Error(reason)); };
  const onAbort = () => stop('stopped before it was done (the agent is shutting down)');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted) onAbort();
  const timer = options.timeoutMs === undefined ? undefined
    : setTimeout(() => stop(`not settled within ${Math.round(options.timeoutMs! / 100) / 10} s`), options.timeoutMs);
  const signal = controller.signal;
  const aborted = new Promise<never>((_, reject) => {
    const fail = () => reject(signal.reason as Error);
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
  aborted.catch(() => {});

  let connector: Connector | undefined;
  let created: Promise<Connector> | undefined;
  const results = new Map<number, SettleResult>();
  let filesStarted = false;
  try {
    const to = targetFolder(request);
    created = Promise.resolve(connectors.create(request.connection));
    connector = await Promise.race([created, aborted]);
    const source = await Promise.race([sourceShape(connector, request.source_path, signal), aborted]);
    filesStarted = true;
    const settle = new FileSettler(connector, request.action, source, to, signal);
    const files = request.files;
    let next = 0;
    const worker = async () => {
      while (next < files.length && !signal.aborted) {
        const i = next++;
        results.set(i, await settle.one(files[i]!));
      }
    };
    const workers = Array.from({ length: Math.min(options.concurrency ?? SETTLE_CONCURRENCY, files.length) }, worker);
    await Promise.race([Promise.all(workers), aborted]);
    return { results: request.files.map((file, i) => results.get(i) ?? failed(file, signal.reason)) };
  } catch (err) {
    // A timeout or an abort fails each file, however far the request got: the same answer whether
    // it struck while the connection was opening or while the files were being settled.
    if (filesStarted || signal.aborted) return { results: request.files.map((file, i) => results.get(i) ?? failed(file, signal.aborted ? signal.reason : err)) };
    return { results: [], error: truncate(reasonOf(err), ERROR_CHARS) };
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    stop('settled'); // ends what a connector that ignored the race still runs
    if (connector) await connector.close().catch(() => {});
    // One still being made when the race was lost is closed once made (not waited for).
    else void created?.then((late) => late.close()).catch(() => {});
  }
}

/** For a move, the folder the files go under (relative to the base path); refused when it leaves the base path. */
function targetFolder(request: SettleRequest): string | null {
  if (request.action !== 'move') return null;
  if (request.to === undefined) throw new Error('to: a move needs the folder to move the files to');
  try {
    return relativePath(request.to);
  } catch (err) {
    throw new Error(`to: ${reasonOf(err)}`);
  }
}

async function sourceShape(connector: Connector, sourcePath: string, signal: AbortSignal): Promise<SourceShape> {
  let rel: string;
  try {
    rel = relativePath(sourcePath);
  } catch (err) {
    throw new Error(`source_path: ${reasonOf(err)}`);
  }
  const top = await connector.stat(rel, { signal });
  if (!top) return { kind: 'missing', rel };
  return { kind: top.kind === 'file' ? 'file' : 'folder', rel };
}

/** Why a file path is refused before the store is touched; null when it is a clean relative path. */
export function refusedPath(path: string): string | null {
  if (/[\u0000-\u001f\u007f]/.test(path)) return 'the path holds a control character';
  if (path.includes('\\')) return 'the path holds a backslash';
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.' || segment === '..') return `the path has an empty, "." or ".." segment`;
  }
  return null;
}

/** One request's per-file work: the checks, then the move or delete. */
class FileSettler {
  constructor(
    private readonly connector: Connector,
    private readonly action: SettleRequest['action'],
    private readonly source: SourceShape,
    private readonly to: string | null,
    private readonly signal: AbortSignal,
  ) {}

  /** What became of `file`; never throws. */
  async one(file: SettleFile): Promise<SettleResult> {
    try {
      const refused = refusedPath(file.path);
      if (refused) return { path: file.path, outcome: 'failed', error: `refused: ${refused}` };
      const from = this.sourceOf(file.path);
      if (from === null) {
        return { path: file.path, outcome: 'failed', error: `refused: the source path is the file ${shownPath(this.source.rel)}, whose name is not ${file.path}` };
      }
      const target = this.to === null ? null : joinRel(this.to, file.path);
      if (target === from) return { path: file.path, outcome: 'failed', error: `the target ${shownPath(target)} is the file itself` };
      const entry = this.source.kind === 'missing' ? null : await this.connector.stat(from, { signal: this.signal });
      if (!entry) return { path: file.path, outcome: target !== null && (await this.holds(target, file.size)) ? 'moved' : 'gone' };
      if (entry.kind !== 'file') return { path: file.path, outcome: 'failed', error: `${shownPath(from)} is a folder, not a file` };
      if (entry.size !== file.size) return { path: file.path, outcome: 'changed' };
      if (!this.connector.capabilities.directories && (await this.hasKeysBelow(from))) {
        return { path: file.path, outcome: 'failed', error: `${shownPath(from)} also has objects below it: refused, removing it would remove them too` };
      }
      if (target === null) {
        await this.connector.remove(from, { signal: this.signal });
        return { path: file.path, outcome: 'deleted' };
      }
      await this.move(from, target, file.size);
      return { path: file.path, outcome: 'moved' };
    } catch (err) {
      return failed(file, err);
    }
  }

  /** The file's path on the store (relative to the base path), or null when the request names another file than a one-file source. */
  private sourceOf(path: string): string | null {
    if (this.source.kind === 'file') return path === baseName(this.source.rel) ? this.source.rel : null;
    return joinRel(this.source.rel, path);
  }

  private async move(from: string, target: string, size: number): Promise<void> {
    const { connector, signal } = this;
    if (connector.capabilities.rename) {
      if (connector.capabilities.directories && parentOf(target) !== '') await connector.mkdir(parentOf(target), { signal });
      await connector.rename(from, target, { signal });
      return;
    }
    // Copy and delete: streamed (never held whole), and the source stays unless the copy is whole.
    const body = await connector.read(from, { signal });
    let written: number;
    try {
      written = (await connector.write(target, body, { size, signal })).size;
    } finally {
      body.destroy();
    }
    if (written !== size) throw new Error(`the copy at ${shownPath(target)} has ${written} bytes, not ${size}: the source was left in place`);
    await connector.remove(from, { signal });
  }

  /** The target holds a file of the expected size (an earlier request moved it). */
  private async holds(target: string, size: number): Promise<boolean> {
    const entry = await this.connector.stat(target, { signal: this.signal });
    return entry?.kind === 'file' && entry.size === size;
  }

  /** On an object store, whether keys exist below `rel/` (a remove of `rel` takes them with it). */
  private async hasKeysBelow(rel: string): Promise<boolean> {
    try {
      for await (const _ of this.connector.list(rel, { recursive: false, signal: this.signal })) return true;
    } catch (err) {
      if (err instanceof ConnectorError && (err.code === 'NOT_FOUND' || err.code === 'CONFLICT')) return false;
      throw err;
    }
    return false;
  }
}

function failed(file: SettleFile, err: unknown): SettleResult {
  return { path: file.path, outcome: 'failed', error: truncate(reasonOf(err), ERROR_CHARS) };
}
