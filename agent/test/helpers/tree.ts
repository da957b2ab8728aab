import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import type { FileResult, JobOptions } from '@xfer/shared';
import { AgentAccess } from '../../src/connectors/access.js';
import { FsConnector } from '../../src/connectors/fs/fs.connector.js';
import { parseTempName, type RunRef } from '../../src/copy/leftovers.js';
import type { Connector } from '../../src/connectors/types.js';
import { copyTree } from '../../src/copy/copy-engine.js';
import type { CopyOutcome, DirectCopyRequest } from '../../src/copy/types.js';

/** A fresh temporary directory; remove it with `rmTemp`. */
export function tempDir(prefix = 'xfer-agent-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function rmTemp(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** A source and a destination directory, fresh for each test of the calling file (jest hooks). */
export function sourceAndDestination(): { readonly src: string; readonly dst: string } {
  const dirs = { src: '', dst: '' };
  beforeEach(() => {
    dirs.src = tempDir('xfer-src-');
    dirs.dst = tempDir('xfer-dst-');
  });
  afterEach(() => {
    rmTemp(dirs.src);
    rmTemp(dirs.dst);
  });
  return dirs;
}

/** Writes `files` (relative path → content; a path ending in `/` is an empty directory) under `root`. */
export function writeTree(root: string, files: Record<string, string | Buffer>): void {
  for (const [path, content] of Object.entries(files)) {
    if (path.endsWith('/')) mkdirSync(join(root, path), { recursive: true });
    else {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), content);
    }
  }
}

/** Every file (path → SHA-256) and directory (path + '/' → 'dir') under `root`, sorted. */
export function snapshot(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const abs = join(dir, entry.name);
      const rel = relative(root, abs);
      if (entry.isDirectory()) {
        out[`${rel}/`] = 'dir';
        walk(abs);
      } else out[rel] = sha256(readFileSync(abs));
    }
  };
  walk(root);
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

/** Paths under `root` that look like the engine's temporary files. */
export function partFiles(root: string): string[] {
  return Object.keys(snapshot(root)).filter((p) => parseTempName(p.slice(p.lastIndexOf('/') + 1)) !== null);
}

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** An agent's access that allows exactly these local directories (and the default host rules). */
export function allowingRoots(...roots: string[]): AgentAccess {
  return new AgentAccess({ allowRoots: roots, allowHosts: [], denyHosts: [] });
}

/** The fs connector on `root`, which the test's agent access allows explicitly (the default allows no directory). */
export function fsConnector(root: string): FsConnector {
  // No fsync: these tests do not crash the machine, and thousands of fsyncs would only slow them.
  return new FsConnector({ root, fsync: false, access: allowingRoots(root) });
}

export function options(overrides: Partial<JobOptions> = {}): JobOptions {
  return { overwrite: 'if_changed', verify: 'checksum', concurrency: 4, ...overrides };
}

export function mtime(path: string): Date {
  return statSync(path).mtime;
}

/** Fast retries for tests. */
export const FAST_RETRIES = { retries: 3, retryBaseMs: 1, retryMaxMs: 5 };

/**
 * Copies everything below the source's base to `destinationPath` (default `/`) with `overwrite:
 * always`, `options` over the test defaults and fast retries: the outcome, and each file's result
 * sorted by path.
 */
export async function copyAll(
  source: Connector, destination: Connector, o: { destinationPath?: string; options?: Partial<JobOptions>; run?: RunRef } = {},
): Promise<CopyOutcome & { files: FileResult[] }> {
  const files: FileResult[] = [];
  const outcome = await copyTree({
    source, sourcePath: '/', destination, destinationPath: o.destinationPath ?? '/', options: options({ overwrite: 'always', ...o.options }), resume: false,
    ...(o.run ? { run: o.run } : {}), signal: new AbortController().signal, tuning: FAST_RETRIES, observer: { fileDone: (r) => files.push(r) },
  } satisfies DirectCopyRequest);
  return { ...outcome, files: files.sort((a, b) => a.path.localeCompare(b.path)) };
}
