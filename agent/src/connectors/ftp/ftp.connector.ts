import { guardWrite } from '@xfer/storage';
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import type { Client, FileInfo } from 'basic-ftp';
import type { ConnectionSettings } from '@xfer/shared';
import { joinRel, parentOf, relativePath, resolvePath, shownPath } from '../paths.js';
import { abortedError } from '../aborted.js';
import { closedAccess, type AgentAccess } from '../access.js';
import { ConnectorError, type Connector, type ConnectorCapabilities, type ConnectorContext, type Entry, type WriteOptions, type WriteResult } from '../types.js';
import { DEFAULT_FTP_TUNING, ftpEndpoint, type FtpEndpoint, type FtpTuning } from './ftp.config.js';
import { ftpError, replyCode } from './ftp.errors.js';
import { FtpPool, type FtpLease } from './ftp.pool.js';
import { rangeStream } from './ftp.read.js';

/** See write(): empty TLS uploads to vsftpd failed 100 of 100 times without a pause, 0 of 150 with 2 to 50 ms. */
const EMPTY_TLS_UPLOAD_GRACE_MS = 25;

/**
 * FTP (RFC 959, passive mode) and FTPS (explicit AUTH TLS or implicit TLS, optional certificate
 * pinning) through basic-ftp, with a small pool of control connections. Absolute paths on every
 * command; listings through CWD + LIST (no globbing of the name). Bytes land at the path as they
 * arrive: the engine writes a temporary name and renames (RNFR/RNTO). FTP has no portable
 * checksum: a write checks the server's SIZE against the bytes sent, the engine reads back.
 */
export class FtpConnector implements Connector {
  readonly type = 'ftp' as const;
  /**
   * `modTime` is learnt from the server (docs/connectors.md "Modification times"): `set` until the
   * first login's FEAT lists neither MFMT nor MDTM, or a two-argument MDTM (vsftpd's way, where
   * MFMT is missing) is refused; `none` from then on.
   */
  readonly capabilities: ConnectorCapabilities = { rename: true, directories: true, modTime: 'set', modTimePrecision: 1000 };
  private readonly base: string;
  private readonly endpoint: FtpEndpoint;
  private readonly pool: FtpPool;
  /** How a modification time is set: RFC 3659's MFMT, vsftpd's `MDTM <time> <path>`, or not at all. */
  private setTime: 'mfmt' | 'mdtm' | 'none' | undefined;

  constructor(settings: ConnectionSettings, tuning: Partial<FtpTuning> = {}, access: AgentAccess = closedAccess()) {
    this.base = settings.path || '/';
    this.endpoint = ftpEndpoint(settings);
    this.pool = new FtpPool(this.endpoint, { ...DEFAULT_FTP_TUNING, ...tuning }, access.network);
    this.pool.onFeatures = (features) => {
      this.setTime ??= features.has('MFMT') ? 'mfmt' : features.has('MDTM') ? 'mdtm' : 'none';
      if (this.setTime === 'none') this.capabilities.modTime = 'none';
    };
  }

  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    const rel = relativePath(path);
    yield* this.walk(rel, options.recursive, options.signal, true);
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry | null> {
    const rel = relativePath(path);
    return this.run(options.signal, 'stat', rel, async (client) => {
      const remote = this.remote(rel);
      const kind = await kindOf(client, remote);
      if (kind === null) return null;
      if (kind === 'directory') return { path: rel, kind, size: 0 };
      const size = await client.size(remote);
      const modifiedAt = await client.lastMod(remote).catch(() => undefined);
      return { path: rel, kind, size, modifiedAt };
    });
  }

  async read(path: string, options: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const rel = relativePath(path);
    const { signal } = options;
    const lease = await this.pool.acquire(signal);
    try {
      const remote = this.remote(rel);
      const size = await abortable(lease.client, signal, () => lease.client.size(remote)).catch(async (err: unknown) => {
        if (replyCode(err) !== 550) throw err;
        if ((await kindOf(lease.client, remote)) === 'directory') throw new ConnectorError('CONFLICT', `read ${shownPath(rel)}: is a directory`);
        throw new ConnectorError('NOT_FOUND', `read ${shownPath(rel)}: does not exist`, { cause: err });
      });
      const start = options.start ?? 0;
      const end = Math.min(options.end ?? Infinity, size - 1);
      if (start > end) {
        lease.release();
        return Readable.from([]);
      }
      return await rangeStream(lease, remote, rel, { start, end, size }, signal);
    } catch (err) {
      lease.release(true);
      if (signal?.aborted) throw abortedError('read', rel, signal);
      throw ftpError(err, rel, 'read');
    }
  }

  async write(path: string, body: Readable, options: WriteOptions = {}): Promise<WriteResult> {
    const rel = relativePath(path);
    const { signal } = options;
    if (rel === '') throw new ConnectorError('CONFLICT', 'write: the base path is a directory, not a file');
    const remote = this.remote(rel);
    let sent = 0;
    let flowing = false;
    // Pulled only once the server accepted STOR (150), so a refused STOR leaves the body unread for a retry.
    const tls = this.endpoint.security !== 'none';
    const source = Readable.from((async function* () {
      flowing = true;
      for await (const chunk of body) {
        if ((chunk as Buffer).length === 0) continue;
        sent += (chunk as Buffer).length;
        yield chunk as Buffer;
      }
      // vsftpd fails a TLS upload that closes right after the data connection's handshake (426
      // "Failure reading network stream", or a decode error alert): an empty file needs a moment.
      if (tls && sent === 0) await delay(EMPTY_TLS_UPLOAD_GRACE_MS);
    })());
    source.on('error', () => undefined);
    let lease: FtpLease | undefined;
    const cleanup = async (err: unknown) => {
      // Leave nothing behind: once STOR was accepted (or may have been), the file exists, partial.
      if (lease && (flowing || replyCode(err) === undefined)) await this.removeQuietly(lease, remote);
      source.destroy();
    };
    try {
      return await guardWrite(
        body,
        { signal, aborted: () => abortedError('write', rel, signal!), mapError: (err) => ftpError(err, rel, 'write'), cleanup, abortTarget: source },
        async () => {
          lease = await this.pool.acquire(signal);
          const { client } = lease;
          try {
            await client.uploadFrom(source, remote);
          } catch (err) {
            // Refused before any byte (vsftpd: 553 for a missing parent and for no permission alike): find out which.
            if (flowing || replyCode(err) === undefined) throw err;
            await this.prepareTarget(client, rel, err);
            try {
              await client.uploadFrom(source, remote);
            } catch (again) {
              if (flowing || replyCode(again) === undefined) throw again;
              throw refused('write', rel, again);
            }
          }
          const stored = await client.size(remote);
          if (stored !== sent) throw new ConnectorError('TRANSIENT', `write ${rel}: the server stored ${stored} bytes of the ${sent} sent`);
          if (options.modifiedAt) await this.setModifiedAt(client, remote, options.modifiedAt);
          return { size: sent };
        },
      );
    } finally {
      lease?.release();
    }
  }

  /**
   * Sets the file's modification time (whole seconds, UTC): MFMT where FEAT lists it, else the
   * two-argument MDTM that vsftpd takes (`mdtm_write`, its default). A refusal means the server
   * cannot (or will not for this user): the connector stops trying and says `none`; the file stays written.
   */
  private async setModifiedAt(client: FtpLease['client'], remote: string, time: Date): Promise<void> {
    if (this.setTime === undefined || this.setTime === 'none') return;
    const stamp = time.toISOString().replace(/[-:T]/g, '').slice(0, 14);
    const answer = await client.sendIgnoringError(this.setTime === 'mfmt' ? `MFMT ${stamp} ${remote}` : `MDTM ${stamp} ${remote}`);
    if (answer.code >= 200 && answer.code < 300) return;
    this.setTime = 'none';
    this.capabilities.modTime = 'none';
  }

  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    await this.run(options.signal, 'mkdir', rel, (client) => this.mkdirs(client, rel));
  }

  async remove(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('PERMISSION', "remove: refusing to remove the connection's base path");
    await this.run(options.signal, 'remove', rel, async (client) => {
      const remote = this.remote(rel);
      try {
        await client.remove(remote);
        return;
      } catch (err) {
        if (replyCode(err) !== 550) throw err;
        const kind = await kindOf(client, remote);
        if (kind === null) return;
        if (kind === 'file') throw refused('remove', rel, err);
      }
      await this.removeTree(client, remote, options.signal);
      // Deletes the server refused were passed over as "already gone": say so if anything is left.
      if ((await kindOf(client, remote)) !== null) throw new ConnectorError('PERMISSION', `remove ${rel}: the server refused to remove some of its contents`);
    });
  }

  async rename(from: string, to: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const relFrom = relativePath(from);
    const relTo = relativePath(to);
    if (relFrom === '' || relTo === '') throw new ConnectorError('PERMISSION', "rename: the connection's base path cannot be renamed or replaced");
    await this.run(options.signal, 'rename', relFrom, async (client) => {
      const src = this.remote(relFrom);
      const dst = this.remote(relTo);
      try {
        await client.rename(src, dst);
        return;
      } catch (err) {
        if (replyCode(err) !== 550 && replyCode(err) !== 553) throw err;
        if ((await kindOf(client, src)) === null) throw new ConnectorError('NOT_FOUND', `rename ${relFrom}: does not exist`, { cause: err });
        const target = await kindOf(client, dst);
        if (target === 'directory') throw new ConnectorError('CONFLICT', `rename ${relFrom}: a directory is in the way at ${relTo}`, { cause: err });
        // No portable "replace on rename": a server that refuses an existing target gets it removed first.
        if (target === 'file') await client.remove(dst);
        else await this.mkdirs(client, parentOf(relTo));
      }
      await client.rename(src, dst);
    });
  }

  async test(options: { signal?: AbortSignal } = {}): Promise<string> {
    const kind = await this.run(options.signal, 'test', '', (client) => kindOf(client, this.base));
    const where = `connected to ${this.endpoint.where}`;
    if (kind === null) throw new ConnectorError('NOT_FOUND', `${where}, but the base path ${this.base} does not exist (or may not be entered)`);
    if (kind === 'file') throw new ConnectorError('CONFLICT', `${where}, but the base path ${this.base} is not a directory`);
    return `Connected to ${this.endpoint.where} (${this.pool.tlsSummary}); ${this.base} is a directory`;
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  private remote(rel: string): string {
    return resolvePath(this.base, rel);
  }

  /**
   * Runs `fn` on a lent client, mapping its errors for `op` on `rel`. An idle client the server
   * dropped (idle timeout) fails on its first command without an FTP reply: once, on a fresh one.
   */
  private async run<T>(signal: AbortSignal | undefined, op: string, rel: string, fn: (client: Client) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const lease = await this.pool.acquire(signal);
      try {
        return await abortable(lease.client, signal, () => fn(lease.client));
      } catch (err) {
        const stale = !lease.fresh && attempt === 1 && !signal?.aborted && replyCode(err) === undefined && !(err instanceof ConnectorError);
        // A reply leaves the session usable; anything else (socket fault, timeout) may have left it mid-command.
        lease.release(lease.client.closed || (replyCode(err) === undefined && !(err instanceof ConnectorError)));
        if (stale) {
          this.pool.discardIdle();
          continue;
        }
        if (signal?.aborted) throw abortedError(op, rel, signal);
        throw ftpError(err, rel, op);
      } finally {
        lease.release();
      }
    }
  }

  /**
   * Entries of one directory, then (recursive) each subdirectory's right after it: depth-first,
   * one directory listing in memory per level, the client held only while listing. Symbolic
   * links count when they lead to a file (a link to a directory could loop).
   */
  private async *walk(rel: string, recursive: boolean, signal: AbortSignal | undefined, top: boolean): AsyncGenerator<Entry> {
    const remote = this.remote(rel);
    const entries = await this.run(signal, 'list', rel, async (client) => {
      try {
        await client.cd(remote);
      } catch (err) {
        if (replyCode(err) !== 550) throw err;
        const kind = await kindOf(client, remote);
        if (kind === null) throw new ConnectorError('NOT_FOUND', `list ${shownPath(rel)}: does not exist`, { cause: err });
        if (kind === 'file' && top) throw new ConnectorError('CONFLICT', `list ${shownPath(rel)}: is a file, not a directory`, { cause: err });
        if (kind === 'file') return [];
        throw refused('list', rel, err);
      }
      const out: Entry[] = [];
      for (const info of await client.list()) {
        if (info.name === '.' || info.name === '..' || info.name === '' || info.name.includes('/')) continue;
        const entry = await toEntry(client, joinRel(rel, info.name), info, remote);
        if (entry) out.push(entry);
      }
      return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    });
    for (const entry of entries) {
      yield entry;
      if (recursive && entry.kind === 'directory') yield* this.walk(entry.path, true, signal, false);
    }
  }

  /**
   * After a refused STOR: CONFLICT for a directory in the way, else makes sure the parent exists
   * (another write may have just created it) for one more STOR; a refusal then is PERMISSION.
   */
  private async prepareTarget(client: Client, rel: string, err: unknown): Promise<void> {
    if ((await kindOf(client, this.remote(rel))) === 'directory') throw new ConnectorError('CONFLICT', `write ${rel}: a directory is in the way`, { cause: err });
    await this.mkdirs(client, parentOf(rel));
  }

  /** mkdir -p of `rel`: parents first only when the directory cannot be made directly. */
  private async mkdirs(client: Client, rel: string): Promise<void> {
    const remote = this.remote(rel);
    try {
      await client.send(`MKD ${remote}`);
      return;
    } catch (err) {
      if (replyCode(err) !== 550 && replyCode(err) !== 553) throw err;
      const kind = await kindOf(client, remote);
      if (kind === 'directory') return;
      if (kind === 'file') throw new ConnectorError('CONFLICT', `mkdir ${shownPath(rel)}: a file is in the way`, { cause: err });
      if (rel === '') throw new ConnectorError('NOT_FOUND', `mkdir: the base path ${this.base} does not exist and cannot be created`, { cause: err });
      await this.mkdirs(client, parentOf(rel));
      try {
        await client.send(`MKD ${remote}`);
      } catch (again) {
        if ((await kindOf(client, remote)) !== 'directory') throw refused('mkdir', rel, again);
      }
    }
  }

  private async removeTree(client: Client, remote: string, signal: AbortSignal | undefined): Promise<void> {
    await client.cd(remote);
    const listing = await client.list();
    for (const info of listing) {
      if (info.name === '.' || info.name === '..' || info.name === '' || info.name.includes('/')) continue;
      signal?.throwIfAborted();
      const child = remote === '/' ? `/${info.name}` : `${remote}/${info.name}`;
      if (info.isDirectory) await this.removeTree(client, child, signal);
      else await ignoreMissing(client.remove(child));
    }
    await ignoreMissing(client.send(`RMD ${remote}`));
  }

  private async removeQuietly(lease: FtpLease, remote: string): Promise<void> {
    let cleaner = lease;
    try {
      if (lease.client.closed) cleaner = await this.pool.acquire();
      await cleaner.client.remove(remote).catch(() => undefined);
    } catch {
      // The server is gone: nothing more to do from here; the engine's retry overwrites the name.
    } finally {
      if (cleaner !== lease) cleaner.release();
    }
  }
}

/**
 * What is at `remote`: CWD answers for directories, SIZE for files (vsftpd's 550 replies do not
 * say "missing" from "refused", so the connector asks instead of guessing from the words).
 */
async function kindOf(client: Client, remote: string): Promise<'file' | 'directory' | null> {
  try {
    await client.cd(remote);
    return 'directory';
  } catch (err) {
    if (replyCode(err) === undefined) throw err;
  }
  try {
    await client.size(remote);
    return 'file';
  } catch (err) {
    if (replyCode(err) === undefined) throw err;
    return null;
  }
}

async function toEntry(client: Client, rel: string, info: FileInfo, dir: string): Promise<Entry | null> {
  const modifiedAt = info.modifiedAt;
  // A LIST line (no MLSD) has minutes at best, days for older files: the seconds come from stat (MDTM).
  const needsStat = modifiedAt ? {} : { modifiedAtNeedsStat: true };
  if (info.isDirectory) return { path: rel, kind: 'directory', size: 0, modifiedAt };
  if (info.isFile) return { path: rel, kind: 'file', size: info.size, modifiedAt, ...needsStat };
  if (info.isSymbolicLink) {
    const target = `${dir === '/' ? '' : dir}/${info.name}`;
    const size = await client.size(target).catch(() => null);
    if (size !== null) return { path: rel, kind: 'file', size, modifiedAt, ...needsStat };
  }
  return null;
}

/** Runs `fn`; an abort closes the client, which fails the command in flight. */
async function abortable<T>(client: Client, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
  if (!signal) return fn();
  signal.throwIfAborted();
  const onAbort = () => client.close();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await fn();
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}


function refused(op: string, rel: string, err: unknown): ConnectorError {
  return new ConnectorError('PERMISSION', `${op} ${shownPath(rel)}: the server refused (server: ${(err as Error).message?.trim()})`, { cause: err });
}


async function ignoreMissing<T>(promise: Promise<T>): Promise<T | undefined> {
  try {
    return await promise;
  } catch (err) {
    if (replyCode(err) === 550) return undefined;
    throw err;
  }
}

/** The registry's factory for `ftp` connections. */
export function createFtpConnector(settings: ConnectionSettings, context?: ConnectorContext): Connector {
  return new FtpConnector(settings, {}, context?.access);
}
