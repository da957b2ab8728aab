import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { AgentAccess } from '../access.js';
import { ConnectorError, type Entry } from '../types.js';
import { FsConnector } from './fs.connector.js';

let base: string;
let root: string;
let outside: string;
let fs: FsConnector;

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'xfer-fsconn-'));
  root = join(base, 'root');
  outside = join(base, 'outside');
  mkdirSync(root);
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret.txt'), 'top secret');
  fs = new FsConnector({ root, fsync: false, access: new AgentAccess({ allowRoots: [root], allowHosts: [], denyHosts: [] }) });
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function collect(iterable: AsyncIterable<Entry>): Promise<Entry[]> {
  const out: Entry[] = [];
  for await (const e of iterable) out.push(e);
  return out;
}

async function code(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectorError);
    return (err as ConnectorError).code;
  }
  throw new Error('expected a rejection');
}

describe('fs connector', () => {
  test('writes, stats, reads (ranges included), renames and removes', async () => {
    const written = await fs.write('a/b/file.txt', Readable.from([Buffer.from('hello '), Buffer.from('world')]), { size: 11 });
    expect(written).toEqual({ size: 11 });
    expect(await fs.stat('a/b/file.txt')).toMatchObject({ path: 'a/b/file.txt', kind: 'file', size: 11 });
    expect(await fs.stat('/a/b/')).toMatchObject({ path: 'a/b', kind: 'directory', size: 0 });
    expect(await fs.stat('nope')).toBeNull();
    expect(await text(await fs.read('a/b/file.txt'))).toBe('hello world');
    expect(await text(await fs.read('a/b/file.txt', { start: 6, end: 8 }))).toBe('wor');
    await fs.rename('a/b/file.txt', 'c/renamed.txt');
    expect(readFileSync(join(root, 'c/renamed.txt'), 'utf8')).toBe('hello world');
    await fs.remove('c/renamed.txt');
    await fs.remove('c/renamed.txt'); // idempotent
    await fs.remove('a');
    expect(readdirSync(root)).toEqual(['c']);
  });

  test('lists recursively, directories before their contents, with relative paths', async () => {
    mkdirSync(join(root, 'x/y/empty'), { recursive: true });
    writeFileSync(join(root, 'x/y/z.txt'), 'z');
    writeFileSync(join(root, 'top.txt'), 'top');
    const entries = await collect(fs.list('', { recursive: true }));
    const paths = entries.map((e) => e.path);
    expect(paths.sort()).toEqual(['top.txt', 'x', 'x/y', 'x/y/empty', 'x/y/z.txt']);
    expect(paths.indexOf('x')).toBeLessThan(paths.indexOf('x/y'));
    expect(paths.indexOf('x/y')).toBeLessThan(paths.indexOf('x/y/z.txt'));
    expect((await collect(fs.list('x', { recursive: false }))).map((e) => e.path)).toEqual(['x/y']);
    expect(await code(collect(fs.list('missing', { recursive: true })))).toBe('NOT_FOUND');
    expect(await code(collect(fs.list('top.txt', { recursive: true })))).toBe('CONFLICT');
  });

  test('refuses paths that climb out of the base', async () => {
    expect(await code(fs.stat('../outside/secret.txt'))).toBe('PERMISSION');
    expect(await code(fs.read('a/../../outside/secret.txt'))).toBe('PERMISSION');
    expect(await code(fs.write('../evil.txt', Readable.from(['x']), {}))).toBe('PERMISSION');
    expect(await code(fs.remove('..'))).toBe('PERMISSION');
    expect(await code(fs.remove(''))).toBe('PERMISSION');
    expect(existsSync(join(base, 'evil.txt'))).toBe(false);
  });

  test('refuses symbolic links that lead outside the base, for every operation', async () => {
    symlinkSync(outside, join(root, 'door'));
    symlinkSync(join(outside, 'secret.txt'), join(root, 'secret-link'));
    symlinkSync(join(outside, 'not-yet.txt'), join(root, 'dangling'));
    expect(await code(fs.read('door/secret.txt'))).toBe('PERMISSION');
    expect(await code(fs.read('secret-link'))).toBe('PERMISSION');
    expect(await code(fs.stat('door/secret.txt'))).toBe('PERMISSION');
    expect(await code(fs.write('door/planted.txt', Readable.from(['x']), {}))).toBe('PERMISSION');
    expect(await code(fs.write('dangling', Readable.from(['x']), {}))).toBe('PERMISSION');
    expect(await code(fs.mkdir('door/newdir'))).toBe('PERMISSION');
    expect(await code(fs.rename('door/secret.txt', 'stolen.txt'))).toBe('PERMISSION');
    expect(await code(collect(fs.list('door', { recursive: true })))).toBe('PERMISSION');
    expect(readdirSync(outside)).toEqual(['secret.txt']);
    // Removing the link removes the link, never what it points to.
    await fs.remove('secret-link');
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('top secret');
  });

  test('listings skip links that leave the base or point at directories, and show links to files inside', async () => {
    writeFileSync(join(root, 'real.txt'), 'real');
    mkdirSync(join(root, 'sub'));
    symlinkSync(join(root, 'real.txt'), join(root, 'alias.txt'));
    symlinkSync(join(root, 'sub'), join(root, 'sub-link'));
    symlinkSync(outside, join(root, 'door'));
    symlinkSync(join(outside, 'secret.txt'), join(root, 'secret-link'));
    const paths = (await collect(fs.list('', { recursive: true }))).map((e) => `${e.path}:${e.kind}`).sort();
    expect(paths).toEqual(['alias.txt:file', 'real.txt:file', 'sub:directory']);
  });

  test('an aborted write leaves no file and rejects with a ConnectorError', async () => {
    const controller = new AbortController();
    const body = new Readable({ read() {} });
    body.push(Buffer.alloc(1024));
    const writing = fs.write('partial.bin', body, { signal: controller.signal });
    setImmediate(() => controller.abort());
    expect(await code(writing)).toBe('TRANSIENT');
    expect(existsSync(join(root, 'partial.bin'))).toBe(false);
  });

  test('a body that errors leaves no file', async () => {
    const body = new Readable({ read() {} });
    body.push(Buffer.alloc(1024));
    setImmediate(() => body.destroy(new Error('upstream broke')));
    await expect(fs.write('broken.bin', body, {})).rejects.toBeInstanceOf(ConnectorError);
    expect(existsSync(join(root, 'broken.bin'))).toBe(false);
  });

  test('read of a missing file is NOT_FOUND; read of a directory is CONFLICT', async () => {
    mkdirSync(join(root, 'd'));
    expect(await code(fs.read('missing.txt'))).toBe('NOT_FOUND');
    expect(await code(fs.read('d'))).toBe('CONFLICT');
  });

  test('test() says the base is usable, or what is wrong with it', async () => {
    expect(await fs.test()).toMatch(/readable and writable/);
    const missing = new FsConnector({ root: join(base, 'gone'), access: new AgentAccess({ allowRoots: [base], allowHosts: [], denyHosts: [] }) });
    await expect(missing.test()).rejects.toMatchObject({ code: 'NOT_FOUND', message: expect.stringContaining('does not exist') });
  });
});
