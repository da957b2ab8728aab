import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ShareLinkMessages } from '@xfer/shared';
import { BINARIES, startStack, type Stack } from '../src/stack.js';
import { cliEnv, jsonOf, lines, runCli, startCli, type CliRun } from './support/cli.js';
import { eicar } from '../src/tools/eicar.js';

/**
 * `xfer files …` and `xfer shares …` as the built binary against a real control plane whose
 * uploads the real clamd scans: files stream up and come back byte-identical (to a file, to
 * stdout, resumed with a Range request), the output path never holds a partial file (unknown id,
 * connection cut, process killed), share links work with no credentials at all, and refusals map
 * to the documented exit codes with the server's message as the one stderr line.
 */
const run = randomBytes(3).toString('hex');
const folder = `/cli-files-${run}`;
const UPLOAD_LIMIT = 12_000_000;
let stack: Stack;
let home: string;
let work: string;
let content: Buffer;
let local: string;
let file: { id: string; name: string; size: number; sha256: string; path: string };

interface Opts { input?: string | Buffer; env?: Record<string, string | undefined> }

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** The CLI's environment: a HOME of its own, credentials from XFER_URL/XFER_API_KEY unless `env` changes them. */
const env = (extra: Record<string, string | undefined> = {}) => cliEnv(home, { XFER_URL: stack.url, XFER_API_KEY: stack.api.token, ...extra });
const xfer = (args: string[], o: Opts = {}): CliRun => runCli(args, { env: env(o.env), input: o.input, cwd: work });
const json = <T = any>(args: string[], o: Opts = {}): T => jsonOf<T>(xfer([...args, '--json'], o));
/** The CLI run without blocking this process (which serves the proxies below): `child` and the promise of its outcome. */
const xferAsync = (args: string[], extra: Record<string, string | undefined> = {}) => startCli(args, { env: env(extra), cwd: work });

/**
 * A failure: the exit code, nothing on stdout, one error line on stderr, last (an upload's
 * progress lines may come first: without --json, stderr is also where progress goes); with
 * `json`, run again with --json: the same exit code and `{"error"}` as the only stderr line.
 */
function fails(args: string[], status: number, opts: { env?: Record<string, string | undefined>; json?: boolean } = {}): string {
  const res = xfer(args, opts);
  expect({ status: res.status, stdout: res.stdout }).toEqual({ status, stdout: '' });
  const all = lines(res.stderr);
  expect(all.filter((l) => l.startsWith('Error'))).toEqual([all.at(-1)]);
  if (!opts.json) return all.at(-1)!;
  const json = xfer([...args, '--json'], opts);
  expect({ status: json.status, stdout: json.stdout, stderr: lines(json.stderr).length }).toEqual({ status, stdout: '', stderr: 1 });
  expect(JSON.parse(json.stderr)).toEqual({ error: all.at(-1)!.replace(/^Error: /, '') });
  return all.at(-1)!;
}

/**
 * A TCP proxy in front of the control plane that passes the first `limit` bytes the server sends
 * on a connection, then cuts it (`cut`) or passes nothing more (`stall`): a network that fails
 * in the middle of a download.
 */
async function faultyProxy(limit: number, fault: 'cut' | 'stall'): Promise<{ url: string; close(): void }> {
  const target = new URL(stack.url);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) { sockets.add(s); s.on('error', () => {}); s.on('close', () => { client.destroy(); upstream.destroy(); }); }
    client.pipe(upstream);
    let passed = 0;
    upstream.on('data', (chunk: Buffer) => {
      if (passed < limit) client.write(chunk.subarray(0, limit - passed));
      passed += chunk.length;
      if (passed < limit) return;
      if (fault === 'cut') client.end(() => client.destroy());
      else upstream.pause();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${target.pathname}`,
    close: () => { for (const s of sockets) s.destroy(); server.close(); },
  };
}

beforeAll(async () => {
  if (!process.env.XFER_TEST_CLAMD) throw new Error('XFER_TEST_CLAMD is not set: run through jest (its global setup starts clamd)');
  stack = await startStack({ env: process.env, serverEnv: { XFER_CLAMD: process.env.XFER_TEST_CLAMD, XFER_UPLOAD_MAX_BYTES: String(UPLOAD_LIMIT) } });
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-files-home-'));
  work = mkdtempSync(join(tmpdir(), 'xfer-cli-files-'));
  content = randomBytes(6 * 1024 * 1024 + 123);
  mkdirSync(join(work, 'src'));
  local = join(work, 'src', `data ${run}.bin`);
  writeFileSync(local, content);
  file = json(['files', 'upload', local, '--path', `${folder}/sub`]);
}, 180_000);

afterAll(async () => {
  for (const dir of [home, work]) if (dir) rmSync(dir, { recursive: true, force: true });
  await stack?.stop();
}, 60_000);

test('upload streams a file up and prints its record; list and search find it', async () => {
  expect(file).toMatchObject({ name: `data ${run}.bin`, path: `${folder}/sub`, size: content.length, sha256: sha256(content) });
  expect(await stack.api.data('GET', `/files/${file.id}`)).toEqual(file);

  const ids = (items: { id: string }[]) => items.map((f) => f.id);
  expect(ids(json(['files', 'list', '--path', `${folder}/sub`]))).toEqual([file.id]);
  expect(ids(json(['files', 'list', '--path', folder]))).toEqual([]);
  expect(ids(json(['files', 'list', '--path', folder, '--recursive', '--all', '--limit', '1']))).toEqual([file.id]);
  const table = xfer(['files', 'list', '--path', folder, '-r']);
  expect(lines(table.stdout)[0]).toMatch(/^ID +PATH +NAME +SIZE +TYPE +CREATED$/);
  expect(lines(table.stdout)[1]).toMatch(new RegExp(`^${file.id} +${folder}/sub +data ${run}\\.bin +6\\.29 MB +application/octet-stream +\\S+$`));

  expect(ids(json(['files', 'search', '-q', `DATA ${run}`]))).toEqual([file.id]);
  expect(ids(json(['files', 'search', '-q', run, '--min-size', '6MiB', '--max-size', '7MB', '--type', 'application/*']))).toEqual([file.id]);
  expect(ids(json(['files', 'search', '-q', run, '--max-size', '6MiB']))).toEqual([]);
  expect(fails(['files', 'search', '--min-size', 'lots'], 2)).toContain('Not a size: "lots"');

  const fromStdin = json(['files', 'upload', '-', '--name', `notes ${run}.txt`, '--path', folder], { input: 'hello from stdin\n' });
  expect(fromStdin).toMatchObject({ name: `notes ${run}.txt`, path: folder, size: 17, mime_type: 'text/plain', sha256: sha256(Buffer.from('hello from stdin\n')) });
  expect(fails(['files', 'upload', '-'], 2, { json: true })).toContain('needs --name');
  expect(fails(['files', 'upload', join(work, 'missing.bin')], 2)).toContain('No such file');
  expect(fails(['files', 'upload', work], 2)).toContain('Not a regular file');
});

test('progress: plain lines on stderr without --json (non-TTY), none with --json', () => {
  const small = join(work, `progress ${run}.bin`);
  writeFileSync(small, randomBytes(3_000_000));
  const plain = xfer(['files', 'upload', small, '--path', folder], { env: { XFER_PROGRESS_INTERVAL_MS: '1' } });
  expect(plain.status).toBe(0);
  expect(plain.stdout).toMatch(/^sha256: +[0-9a-f]{64}$/m);
  const progress = lines(plain.stderr);
  expect(progress.length).toBeGreaterThanOrEqual(1);
  for (const line of progress) expect(line).toMatch(new RegExp(`^progress ${run}\\.bin \\[(uploading|scanning|uploaded)\\] \\d+%: `));
  expect(progress.at(-1)).toMatch(/\[uploaded\] 100%: 3\.00 MB \/ 3\.00 MB/);

  const down = xfer(['files', 'download', file.id, '-o', join(work, `progress-${run}.out`)], { env: { XFER_PROGRESS_INTERVAL_MS: '1' } });
  expect(down.status).toBe(0);
  expect(lines(down.stderr).at(-1)).toMatch(new RegExp(`^progress-${run}\\.out 100%: 6\\.29 MB / 6\\.29 MB`));
  expect(down.stdout.trim()).toBe(`Saved ${join(work, `progress-${run}.out`)} (6.29 MB, sha256 ${file.sha256})`);

  for (const args of [['files', 'upload', small, '--json'], ['files', 'download', file.id, '-o', join(work, `quiet-${run}.out`), '--json']]) {
    const res = xfer(args, { env: { XFER_PROGRESS_INTERVAL_MS: '1' } });
    expect(res.status).toBe(0);
    expect(res.stderr).toBe('');
  }
});

test('on a terminal (script(1) pseudo-terminal) upload and download draw the ink view: name, state, bar, percentage, bytes', () => {
  const src = join(work, `tty-${run}.bin`);
  writeFileSync(src, randomBytes(2_000_000));
  const onTerminal = (args: string[]) => {
    const cmd = [process.execPath, BINARIES.cli, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const res = spawnSync('script', ['-qfec', `stty cols 200 rows 40; ${cmd}`, '/dev/null'], { env: env(), cwd: work, encoding: 'utf8', timeout: 60_000 });
    expect({ status: res.status, out: res.status === 0 ? '' : res.stdout }).toEqual({ status: 0, out: '' });
    return res.stdout.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '');
  };
  const up = onTerminal(['files', 'upload', src, '--path', folder]);
  expect(up).toContain(`tty-${run}.bin`);
  expect(up).toMatch(/uploaded █{24} 100% {2}2\.00 MB \/ 2\.00 MB/);
  const id = /^id: +(\S+)\r?$/m.exec(up)?.[1];
  expect(id).toBeDefined();
  const down = onTerminal(['files', 'download', id!, '-o', join(work, `tty-${run}.out`)]);
  expect(down).toMatch(/█{24} 100% {2}2\.00 MB \/ 2\.00 MB/);
  expect(readFileSync(join(work, `tty-${run}.out`)).equals(readFileSync(src))).toBe(true);
});

test('download: byte-identical to the stored name, to a file and to stdout; never overwrites without --force', () => {
  const saved = json(['files', 'download', file.id]);
  const expected = join(work, file.name);
  expect(saved).toEqual({ file: expected, name: file.name, size: content.length, sha256: file.sha256, resumed_from: 0 });
  expect(sha256(readFileSync(expected))).toBe(file.sha256);
  expect(existsSync(expected + '.xfer-part')).toBe(false);
  expect(fails(['files', 'download', file.id], 2)).toContain('already exists: pass --force');

  const out = join(work, `kept-${run}.bin`);
  writeFileSync(out, 'keep me');
  expect(fails(['files', 'download', file.id, '-o', out], 2)).toBe(`Error: ${out} already exists: pass --force to overwrite it, or --output another path`);
  expect(readFileSync(out, 'utf8')).toBe('keep me');
  expect(json(['files', 'download', file.id, '-o', out, '--force'])).toMatchObject({ file: out, resumed_from: 0 });
  expect(sha256(readFileSync(out))).toBe(file.sha256);

  const dir = join(work, `into-${run}`);
  mkdirSync(dir);
  expect(json(['files', 'download', file.id, '-o', dir]).file).toBe(join(dir, file.name));

  const stdout = xfer(['files', 'download', file.id, '-o', '-']);
  expect(stdout.status).toBe(0);
  expect(stdout.stdoutBytes.length).toBe(content.length);
  expect(sha256(stdout.stdoutBytes)).toBe(file.sha256);
  // A reader that stops early is its own choice: xfer stops quietly (exit 0, nothing on stderr).
  const head = spawnSync('bash', ['-c', `"$0" "$1" files download ${file.id} -o - -q | head -c 1000 | wc -c; echo "\${PIPESTATUS[0]}" >&2`, process.execPath, BINARIES.cli],
    { env: env(), cwd: work, encoding: 'utf8', timeout: 60_000 });
  expect({ stdout: head.stdout.trim(), stderr: head.stderr }).toEqual({ stdout: '1000', stderr: '0\n' });
  const both = xfer(['files', 'download', file.id, '-o', '-', '--json']);
  expect({ status: both.status, stdout: both.stdout, stderr: JSON.parse(both.stderr) })
    .toEqual({ status: 2, stdout: '', stderr: { error: '--json cannot be used with --output -: stdout carries the content' } });
});

test('--continue resumes a truncated partial file with a Range request; a corrupt one is discarded (exit 1)', async () => {
  const out = join(work, `resumed-${run}.bin`);
  const cut = 2_500_000;
  writeFileSync(out + '.xfer-part', content.subarray(0, cut));
  expect(json(['files', 'download', file.id, '-o', out, '--continue'])).toEqual({ file: out, name: `resumed-${run}.bin`, size: content.length, sha256: file.sha256, resumed_from: cut });
  expect(readFileSync(out).equals(content)).toBe(true);
  expect(existsSync(out + '.xfer-part')).toBe(false);
  const audit = await stack.api.data<{ details: Record<string, unknown> }[]>('GET', `/activity?action=file.download&resource_id=${file.id}&limit=1`);
  expect(audit[0]!.details).toMatchObject({ range: `bytes=${cut}-` });

  const corrupt = join(work, `corrupt-${run}.bin`);
  writeFileSync(corrupt + '.xfer-part', randomBytes(1_000_000));
  const bad = xfer(['files', 'download', file.id, '-o', corrupt, '--continue', '-q']);
  expect({ status: bad.status, stdout: bad.stdout }).toEqual({ status: 1, stdout: '' });
  expect(bad.stderr.trim()).toMatch(/^Error: Download of corrupt-.*\.bin is corrupt \(SHA-256 [0-9a-f]{64}, the server's is [0-9a-f]{64}\): nothing was kept$/);
  expect(existsSync(corrupt)).toBe(false);
  expect(existsSync(corrupt + '.xfer-part')).toBe(false);

  expect(fails(['files', 'download', file.id, '-o', '-', '--continue'], 2)).toContain('--continue');
});

test('a failed download leaves no file at the output path: unknown id, connection cut, process killed', async () => {
  const unknown = join(work, `unknown-${run}.bin`);
  expect(fails(['files', 'download', '0123456789abcdef01234567', '-o', unknown], 4, { json: true })).toBe('Error: File 0123456789abcdef01234567 not found');
  expect(existsSync(unknown)).toBe(false);
  expect(existsSync(unknown + '.xfer-part')).toBe(false);

  const cutting = await faultyProxy(1_000_000, 'cut');
  try {
    const out = join(work, `cut-${run}.bin`);
    const res = await xferAsync(['files', 'download', file.id, '-o', out], { XFER_URL: cutting.url });
    expect(res.status).toBe(6);
    expect(lines(res.stderr).at(-1)).toMatch(/^Error: /);
    expect(existsSync(out)).toBe(false);
    expect(existsSync(out + '.xfer-part')).toBe(false);

    // With --continue the partial file stays for the next attempt, which resumes from it.
    const again = await xferAsync(['files', 'download', file.id, '-o', out, '--continue'], { XFER_URL: cutting.url });
    expect(again.status).toBe(6);
    expect(lines(again.stderr).at(-1)).toMatch(/^Error: Connection to .* was closed unexpectedly$/);
    expect(existsSync(out)).toBe(false);
    const kept = statSync(out + '.xfer-part').size;
    expect(kept).toBeGreaterThan(0);
    expect(json(['files', 'download', file.id, '-o', out, '--continue'])).toMatchObject({ resumed_from: kept, sha256: file.sha256 });
    expect(readFileSync(out).equals(content)).toBe(true);
  } finally {
    cutting.close();
  }

  const stalling = await faultyProxy(1_000_000, 'stall');
  try {
    const out = join(work, `killed-${run}.bin`);
    const killed = xferAsync(['files', 'download', file.id, '-o', out], { XFER_URL: stalling.url });
    const deadline = Date.now() + 30_000;
    while (!(existsSync(out + '.xfer-part') && statSync(out + '.xfer-part').size > 0)) {
      if (Date.now() > deadline) throw new Error('no partial file');
      await new Promise((r) => setTimeout(r, 20));
    }
    killed.child.kill('SIGTERM');
    const res = await killed;
    expect(res.status).toBe(143);
    expect(lines(res.stderr).at(-1)).toBe('Error: Interrupted; nothing was kept');
    expect(existsSync(out)).toBe(false);
    expect(existsSync(out + '.xfer-part')).toBe(false);
  } finally {
    stalling.close();
  }
}, 90_000);

test('share links: download with no credentials at all, --max-downloads, list, revoke (410 → exit 4)', async () => {
  const noCredentials = { XFER_API_KEY: undefined };
  const once = json(['shares', 'create', file.id, '--max-downloads', '1', '--expires-in-hours', '2']);
  expect(once).toMatchObject({ file_id: file.id, status: 'active', max_downloads: 1, downloads: 0, token: expect.any(String), url: expect.stringMatching(/^\/api\/v1\/files\/shared\//) });

  // Refused before any request: the link's one download is not spent.
  expect(fails(['shares', 'download', once.token, '-o', join(work, 'missing', 'x.bin')], 2, { env: noCredentials })).toBe(`Error: No such directory: ${join(work, 'missing')}`);
  const out = join(work, `shared-${run}.bin`);
  expect(json(['shares', 'download', once.token, '-o', out], { env: noCredentials })).toMatchObject({ file: out, sha256: file.sha256 });
  expect(readFileSync(out).equals(content)).toBe(true);
  expect(fails(['shares', 'download', once.token, '-o', join(work, `again-${run}.bin`)], 4, { env: noCredentials, json: true })).toBe(`Error: ${ShareLinkMessages.exhausted}`);
  expect(existsSync(join(work, `again-${run}.bin`))).toBe(false);

  // The human output shows the absolute URL, which needs nothing else: no key, no XFER_URL, no profile.
  const human = xfer(['shares', 'create', file.id]);
  expect(human.status).toBe(0);
  expect(human.stderr).toContain('shown this once');
  const url = /^url: +(\S+)$/m.exec(human.stdout)![1]!;
  expect(url.startsWith(`${stack.url.replace(/\/api\/v1$/, '')}/api/v1/files/shared/`)).toBe(true);
  const anonymous = xfer(['shares', 'download', url, '-o', '-'], { env: { XFER_URL: undefined, XFER_API_KEY: undefined } });
  expect(anonymous.status).toBe(0);
  expect(sha256(anonymous.stdoutBytes)).toBe(file.sha256);
  const linkId = /^id: +(\S+)$/m.exec(human.stdout)![1]!;

  const all = json<any[]>(['shares', 'list', '--all']);
  expect(all.map((s) => s.id)).toEqual(expect.arrayContaining([once.id, linkId]));
  expect(all.every((s) => !('token' in s) && !('url' in s))).toBe(true);
  const forFile = json<any[]>(['shares', 'list', '--file', file.id]);
  expect(forFile.map((s) => s.id).sort()).toEqual([once.id, linkId].sort());
  expect(forFile.find((s) => s.id === once.id)).toMatchObject({ status: 'exhausted', downloads: 1 });
  expect(lines(xfer(['shares', 'list', '--file', file.id]).stdout)[0]).toMatch(/^ID +FILE_ID +STATUS +DOWNLOADS +EXPIRES +CREATED$/);

  expect(json(['shares', 'revoke', file.id, linkId])).toEqual({ id: linkId, deleted: true });
  expect(fails(['shares', 'download', url, '-o', join(work, `revoked-${run}.bin`)], 4, { env: noCredentials })).toBe(`Error: ${ShareLinkMessages.revoked}`);
  expect(fails(['shares', 'revoke', file.id, linkId], 4)).toMatch(/^Error: Share link .* not found$/);
  expect((await stack.api.data<any[]>('GET', `/files/${file.id}/shares`)).find((s) => s.id === linkId)).toMatchObject({ status: 'revoked' });
}, 60_000);

test('malware is refused with exit 2 and the server message; so is a file above the size limit', () => {
  const infected = join(work, `eicar-${run}.com`);
  writeFileSync(infected, eicar());
  expect(fails(['files', 'upload', infected, '--path', folder], 2, { json: true })).toMatch(/^Error: File rejected: malware detected \(.*\)$/);
  const big = join(work, `big-${run}.bin`);
  writeFileSync(big, Buffer.alloc(UPLOAD_LIMIT + 1));
  expect(fails(['files', 'upload', big, '--path', folder], 2, { json: true })).toBe(`Error: File exceeds the upload limit of ${UPLOAD_LIMIT} bytes`);
  expect(json<{ name: string }[]>(['files', 'list', '--path', folder]).map((f) => f.name)).not.toEqual(expect.arrayContaining([`eicar-${run}.com`, `big-${run}.bin`]));
}, 60_000);

test('delete: the file is gone (exit 4) and its share links answer 410 (exit 4)', async () => {
  const victim = json(['files', 'upload', '-', '--name', `victim ${run}.txt`, '--path', folder], { input: 'short-lived' });
  const link = json(['shares', 'create', victim.id]);
  expect(json(['files', 'delete', victim.id])).toEqual({ id: victim.id, deleted: true });
  expect((await stack.api.call('GET', `/files/${victim.id}`)).status).toBe(404);
  expect(fails(['files', 'get', victim.id], 4, { json: true })).toBe(`Error: File ${victim.id} not found`);
  expect(fails(['files', 'delete', victim.id], 4)).toBe(`Error: File ${victim.id} not found`);
  expect(fails(['shares', 'download', link.token, '-o', join(work, `deleted-${run}.bin`)], 4, { env: { XFER_API_KEY: undefined } })).toBe(`Error: ${ShareLinkMessages.fileDeleted}`);
  expect(json<any[]>(['shares', 'list']).find((s) => s.id === link.id)).toMatchObject({ status: 'file_deleted' });
  const human = xfer(['files', 'get', file.id]);
  expect(human.stdout).toMatch(new RegExp(`^sha256: +${file.sha256}$`, 'm'));
});
