import type { Readable } from 'node:stream';
import type { ConnectionSettings, ConnectionType } from '@xfer/shared';
import type { AgentAccess } from './access.js';
import type { KeptTimes } from './kept-times.js';

/**
 * The one contract every storage connector implements (ARCHITECTURE.md "Connectors"), one folder
 * per type under `connectors/<type>/`. The copy engine talks only to this interface.
 *
 * Paths: every `path` argument is relative to the connection's base path (`settings.path`), uses
 * `/` separators, and is normalized by the connector through `resolvePath` (connectors/paths.ts):
 * `..` that would leave the base path, NUL bytes and backslashes are refused with
 * `ConnectorError('PERMISSION')` before any request is made. `''` or `/` names the base itself.
 *
 * Errors: every method rejects only with `ConnectorError`, whose `code` is one of
 * `ConnectorErrorCode` and whose `cause` is the original error.
 */
export interface Connector {
  readonly type: ConnectionType;
  readonly capabilities: ConnectorCapabilities;

  /**
   * Entries below `path` (a directory, or the bucket prefix `path/`), without `path` itself.
   * With `recursive`, the whole tree, depth-first, directories before their contents; never the
   * whole tree in memory (pages or one directory at a time). Object stores report the
   * "directories" implied by keys only where a zero-byte `dir/` marker exists, and report every
   * object. Entry paths are relative to the connection's base path.
   * Throws NOT_FOUND when `path` does not exist (an empty prefix of an object store is an empty
   * directory: it yields nothing).
   */
  list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry>;

  /** The entry at `path`, or null when nothing is there (never throws NOT_FOUND). */
  stat(path: string, options?: { signal?: AbortSignal }): Promise<Entry | null>;

  /**
   * The bytes of the file at `path`, from `start` (inclusive, default 0) to `end` (inclusive,
   * default the last byte). The stream errors with a ConnectorError. Throws NOT_FOUND for a
   * missing file.
   */
  read(path: string, options?: { start?: number; end?: number; signal?: AbortSignal }): Promise<Readable>;

  /**
   * Opens the file at `path` once for several ranged reads (a stream of a multi-stream read,
   * copy/multi-stream.ts), where opening costs a round trip of its own (sftp's OPEN): each of the
   * stream's segments is then a read of the open file. Absent: each range is a `read` with
   * `start` and `end`. Throws as `read` does.
   */
  rangeReader?(path: string, options?: { signal?: AbortSignal }): Promise<RangeReader>;

  /**
   * Writes `body` to `path`, creating missing parent directories, replacing what is there.
   * `size` is a hint (unknown when absent: the body is streamed anyway, never buffered whole).
   * Resolves with the size written and the store's own checksum when it computes one the engine
   * can compare (`checksum`).
   *
   * Visibility: where `capabilities.rename` is false (object stores), the write is atomic: the
   * object appears only complete, checked by the store against the checksums the connector sent
   * (single PUT or multipart commit), and a failed or aborted write leaves nothing behind (the
   * multipart upload is aborted). Where it is true, bytes land at `path` as they arrive: the
   * engine writes to a temporary name, verifies, then `rename`s; on failure or abort the
   * connector removes what it wrote before rejecting.
   */
  write(path: string, body: Readable, options: WriteOptions): Promise<WriteResult>;

  /** Creates the directory and its parents; succeeds when it exists. Object stores may write a `dir/` marker. */
  mkdir(path: string, options?: { signal?: AbortSignal }): Promise<void>;

  /** Removes a file, or a directory with everything below it. Idempotent: a missing path succeeds. */
  remove(path: string, options?: { signal?: AbortSignal }): Promise<void>;

  /**
   * Renames a file, replacing `to` when it exists. Throws UNSUPPORTED where the store has no
   * rename (copy + delete is the caller's choice, not the connector's).
   */
  rename(from: string, to: string, options?: { signal?: AbortSignal }): Promise<void>;

  /**
   * Checks that the endpoint answers, the credentials work and the base path exists; resolves
   * with a message for the user, rejects with a ConnectorError whose message says what is wrong
   * (wrong host, port, credentials or missing path).
   */
  test(options?: { signal?: AbortSignal }): Promise<string>;

  /** Releases sessions and sockets. The connector is not used afterwards. */
  close(): Promise<void>;

  /**
   * Object stores with multipart uploads: the uploads still open below `path` (started and
   * neither completed nor aborted: what a killed agent leaves behind), with the object path each
   * would become. Used by the engine's clean-up of leftovers (copy/leftovers.ts).
   */
  openUploads?(path: string, options?: { signal?: AbortSignal }): AsyncIterable<OpenUpload>;
  /** Aborts one open upload (its parts are freed). Idempotent: an upload already gone succeeds. */
  abortUpload?(upload: OpenUpload, options?: { signal?: AbortSignal }): Promise<void>;

  /**
   * Server-side copy (docs/connectors.md "Server-side copies"): the store itself copies the file at
   * `sourcePath` of `source` to `path`, no byte passing through the agent. Null, before any request,
   * where it cannot: another store or account (the copy must need no authority the source connection
   * does not have), or a file whose copy the store's checksums could not verify; the engine then
   * moves the bytes. Resolves only with a copy the store's checksum showed equal to the source
   * (`storeVerified` names how; sftp, whose servers compute none, reads source and copy back or
   * checks the size and the unchanged source: docs/connectors.md "Server-side copies"); rejects as
   * `write` does, leaving nothing behind. The engine copies straight to `path`: the copy appears
   * there only complete (an object store's commit; a store whose copy could show a partial file
   * copies into `ServerCopyOptions.tempPath` and renames it, as sftp and onedrive do).
   */
  copyFrom?(source: Connector, sourcePath: string, path: string, options: ServerCopyOptions): Promise<WriteResult | null>;
}

export interface ServerCopyOptions {
  /** The source file as listed: its size and `etag` (a copy is verified against it, and made only of that version). */
  entry: Entry;
  signal?: AbortSignal;
  /** As `WriteOptions.modifiedAt`; asked only once the copy goes ahead (it may cost a stat of the source). */
  modifiedAt?: () => Promise<Date | undefined>;
  /**
   * The engine's temporary name beside `path` for this attempt (`tempPathFor`, with the run's tag),
   * for a store that makes its copy there and renames it (sftp, OneDrive); one a killed agent left
   * is then removed by the next attempt (copy/leftovers.ts). Object stores that commit atomically
   * ignore it; a store that needs it copies nothing without it (null: the bytes move).
   */
  tempPath?: string;
  /**
   * The run's `verify`: with `checksum`, a store whose copy no checksum of its own vouches for
   * (sftp) reads the source and the copy back and compares them; with `size` it may stop at the
   * size. Absent: `checksum`.
   */
  verify?: 'checksum' | 'size';
}

export interface WriteOptions {
  size?: number;
  signal?: AbortSignal;
  /**
   * The source file's modification time, to keep (issue 25): set on the written file where the
   * store can (`capabilities.modTime` `set`; a temporary name keeps it through the rename), stored
   * as the object's `mtime` metadata where it cannot (`metadata`, rclone's key and format, so each
   * reads the other's), ignored where neither works (`none`).
   */
  modifiedAt?: Date;
  /**
   * The engine will check the stored bytes by reading them back (`verify = checksum` where the
   * store shows no checksum of its own). A connector that can read the file through the handle it
   * wrote it with, before closing it, does so and returns `WriteResult.readBack`: the engine then
   * does not open the file again (on sftp, two round trips and a channel a file fewer). Others
   * ignore it and the engine reads the file itself.
   */
  readBack?: boolean;
}

/** An open multipart upload: the object path it would create, the store's upload id, when it started (store clock). */
export interface OpenUpload {
  path: string;
  id: string;
  startedAt?: Date;
}

export interface ConnectorCapabilities {
  /** `rename` works (and replaces the target): the engine writes to a temporary name, then renames. */
  rename: boolean;
  /** Real directories exist (not only key prefixes): empty directories are created with `mkdir`. */
  directories: boolean;
  /**
   * Every write is checked by the store against checksums the connector computes over the bytes
   * it sends (Content-MD5 on each request), and the write reports so in `storeVerified`: the
   * engine then computes no MD5 of its own to compare with the store's.
   */
  verifiesWrites?: boolean;
  /**
   * How a written file keeps its source's modification time (`WriteOptions.modifiedAt`): `set` on
   * the file itself, `metadata` on the object (`mtime`), `none` (the store's write time stands).
   * Absent: `none`. docs/connectors.md "Modification times" says which connector does what.
   */
  modTime?: 'set' | 'metadata' | 'none';
  /**
   * How finely a kept modification time survives, in milliseconds (rclone's `Precision`): 1000
   * where the store keeps whole seconds (SFTP v3, FTP, WebDAV, OneDrive), 1 where it keeps
   * milliseconds or finer (JavaScript dates hold no more). Absent: 1000. Two times are the same
   * when they agree to the coarser precision of the two ends.
   */
  modTimePrecision?: number;
  /**
   * Several ranged reads of one file at once pay (a network store, whose each stream is bound by
   * round trips or a per-connection limit): the engine reads large files in several streams
   * (copy/multi-stream.ts). Absent: false (local disks gain nothing from it but memory).
   */
  parallelReads?: boolean;
}

/** One file open for ranged reads (Connector.rangeReader). */
export interface RangeReader {
  /** Bytes `start`..`end` (inclusive), as `Connector.read` gives them; one range at a time. */
  read(start: number, end: number, signal?: AbortSignal): Promise<Readable>;
  /** Closes the file (idempotent, never rejects); a range still being read fails. */
  close(): Promise<void>;
}

export interface Entry {
  /** Relative to the connection's base path, no leading slash ('' for the base itself). */
  path: string;
  kind: 'file' | 'directory';
  /** Bytes (0 for directories). */
  size: number;
  /**
   * Last modification, when the store knows it: the kept one where there is one (a file's own
   * mtime; an object's `mtime` metadata), else the store's write time.
   */
  modifiedAt?: Date;
  /**
   * Set on listing entries whose `modifiedAt` is the store's write time although the object may
   * hold a kept `mtime` that only `stat` returns (S3 listings carry no metadata): a comparison by
   * modification time stats such a file when the sizes match, as rclone does.
   */
  modifiedAtNeedsStat?: boolean;
  /** The store's own checksum of the content, when it has one the engine can compare. */
  checksum?: Checksum;
  /**
   * The server's entity tag (S3 and its interop stores, Azure Blob, WebDAV `getetag`, OneDrive), when it
   * gives one: changes with the content, but is no checksum. A watcher's version identity (watch/identity.ts).
   */
  etag?: string;
}

/**
 * A checksum a store computes itself. `etag` is the plain MD5 ETag of a single-part S3 object;
 * `quickxor` is OneDrive's QuickXorHash (Graph's base64, here as hex). docs/connectors.md
 * "Checksums" says which store reports which, and which pairs compare without reading the bytes.
 */
export interface Checksum {
  algorithm: 'sha256' | 'md5' | 'crc32c' | 'etag' | 'quickxor';
  /** Lower-case hex. */
  value: string;
}

export interface WriteResult {
  size: number;
  checksum?: Checksum;
  /**
   * Set when the store itself checked every byte consumed from `body` against checksums the
   * connector computed from those bytes, and confirmed the whole (e.g. `md5-parts`: each part of
   * a multipart upload sent with Content-MD5, and the object's multipart ETag equal to the one
   * computed from the parts). Names how; the engine then needs no read-back.
   */
  storeVerified?: string;
  /** What the connector read back of the written file when asked (`WriteOptions.readBack`): its SHA-256 (hex) and length. */
  readBack?: { sha256: string; bytes: number };
}

export const CONNECTOR_ERROR_CODES = ['NOT_FOUND', 'AUTH', 'PERMISSION', 'TRANSIENT', 'CONFLICT', 'UNSUPPORTED'] as const;
export type ConnectorErrorCode = (typeof CONNECTOR_ERROR_CODES)[number];

/** The only error a connector throws: a code the engine decides on, the original as `cause`. */
export class ConnectorError extends Error {
  constructor(
    readonly code: ConnectorErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ConnectorError';
  }

  /** Worth retrying (network faults, throttling, 5xx). */
  get transient(): boolean {
    return this.code === 'TRANSIENT';
  }
}

/**
 * What the agent hands a connector besides its settings. Optional everywhere: a connector that
 * needs none of it ignores it, and tests may pass nothing.
 */
export interface ConnectorContext {
  /**
   * What the agent's owner lets connectors touch: local directories and hosts (access.ts).
   * Absent: `closedAccess()`, no local directory and the default host rules.
   */
  access?: AgentAccess;

  /**
   * Credentials the service replaced while the connector used them (an OAuth refresh token
   * rotated by the token endpoint): the agent sends them to the control plane, which stores them
   * sealed in the connection for its next use. `previous` holds the values they replace (the
   * control plane stores the new ones only over those). Fire and forget: never throws, never awaited.
   */
  credentialsChanged?(credentials: Record<string, string>, previous: Record<string, string>): void;

  /**
   * The agent's index of the modification times it kept on objects (kept-times.ts): object
   * stores' listings read it so a comparison stats only the objects it does not know. Absent:
   * every same-size object is stat'ed.
   */
  keptTimes?: KeptTimes;
}

/** Builds a connector for one connection; the registry (connectors/index.ts) maps types to factories. */
export type ConnectorFactory = (settings: ConnectionSettings, context?: ConnectorContext) => Connector;
