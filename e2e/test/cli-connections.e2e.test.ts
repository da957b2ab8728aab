import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { XferClient } from '@xfer/shared';
import { startStack, type Stack } from '../src/stack.js';
import { cliEnv, jsonOf, runCli, type CliRun } from './support/cli.js';

/**
 * `xfer connections …` and `xfer api-keys …` run as the built binary against a real control plane:
 * `--json` prints exactly what the API holds, `--all` follows every page, and errors map to the
 * documented exit codes (4 unknown id, 5 duplicate name, 2 bad flag) as one stderr line.
 */
const run = randomBytes(3).toString('hex');
let stack: Stack;
let home: string;

const xfer = (args: string[], input = ''): CliRun => runCli(args, { env: cliEnv(home), input });
const json = <T = any>(args: string[], input = ''): T => jsonOf<T>(xfer([...args, '--json'], input));

beforeAll(async () => {
  stack = await startStack({ env: process.env });
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-home-'));
  const login = xfer(['auth', 'login', '--url', stack.url], stack.api.token);
  if (login.status !== 0) throw new Error(login.stderr);
}, 120_000);

afterAll(async () => {
  if (home) rmSync(home, { recursive: true, force: true });
  await stack?.stop();
}, 60_000);

test('create, get, update and delete a connection; --json is exactly the API data', async () => {
  const credentials = join(home, 'sftp.json');
  writeFileSync(credentials, JSON.stringify({ username: 'u', password: 'p' }), { mode: 0o600 });
  const created = json(['connections', 'create', '--name', `sftp ${run}`, '--type', 'sftp', '--host', 'sftp.example.test',
    '--path', '/in//./box/', '--credentials-file', credentials]);
  expect(created).toMatchObject({ name: `sftp ${run}`, type: 'sftp', host: 'sftp.example.test', port: 22, path: '/in/box', has_credentials: true });
  expect(created).not.toHaveProperty('credentials');
  expect(json(['connections', 'get', created.id])).toEqual(await stack.api.data('GET', `/connections/${created.id}`));

  const fromStdin = json(['connections', 'create', '--name', `webdav ${run}`, '--type', 'webdav', '--host', 'dav.example.test',
    '--options', '{"secure":false}', '--credentials-stdin'], '{"username":"u","password":"p"}');
  expect(fromStdin).toMatchObject({ type: 'webdav', options: { secure: false }, has_credentials: true });

  // Stored credentials stay bound to where they were given: a new port without them is refused (exit 2, the field named).
  const unbound = xfer(['connections', 'update', created.id, '--port', '2222', '--json']);
  expect({ status: unbound.status, error: JSON.parse(unbound.stdout || unbound.stderr).error }).toMatchObject({ status: 2, error: expect.stringMatching(/^port cannot change without credentials/) });
  const updated = json(['connections', 'update', created.id, '--name', `renamed ${run}`, '--port', '2222', '--credentials-file', credentials]);
  expect(updated).toMatchObject({ id: created.id, name: `renamed ${run}`, port: 2222, host: 'sftp.example.test' });
  expect(json(['connections', 'update', created.id, '--clear', 'port', '--credentials-file', credentials])).toMatchObject({ port: 22 });
  expect(await stack.api.data('GET', `/connections/${created.id}`)).toMatchObject({ name: `renamed ${run}`, port: 22 });

  const human = xfer(['connections', 'get', created.id]);
  expect(human.status).toBe(0);
  expect(human.stdout).toMatch(new RegExp(`^name: +renamed ${run}$`, 'm'));

  expect(json(['connections', 'delete', created.id])).toEqual({ id: created.id, deleted: true });
  expect((await stack.api.call('GET', `/connections/${created.id}`)).status).toBe(404);
}, 90_000); // ten CLI processes, each a node start: 30 s ran out on a loaded 2-core CI machine

test('list --all follows every page and equals what the API lists; without --all one page', async () => {
  for (let i = 0; i < 5; i++) {
    await stack.api.data('POST', '/connections', { name: `nfs ${run} ${i}`, type: 'nfs', host: 'nfs.example.test', path: `/export/${i}` });
  }
  const all = json<unknown[]>(['connections', 'list', '--all', '--limit', '2']);
  expect(all).toEqual(await new XferClient({ baseUrl: stack.url, token: stack.api.token }).connections.all({ limit: 1000 }).toArray());
  expect(all.length).toBeGreaterThanOrEqual(5);
  expect(json<unknown[]>(['connections', 'list', '--limit', '2'])).toEqual(all.slice(0, 2));
  expect(json<{ type: string }[]>(['connections', 'list', '--all', '--type', 'nfs']).every((c) => c.type === 'nfs')).toBe(true);

  // --all writes each page as it arrives: the same bytes as the whole array printed at once.
  const streamed = xfer(['connections', 'list', '--all', '--limit', '2', '--json']);
  expect(streamed.stdout).toBe(JSON.stringify(all, null, 2) + '\n');
  expect(xfer(['connections', 'list', '--all', '--type', 'ftp', '--json']).stdout).toBe('[]\n');

  const table = xfer(['connections', 'list', '--type', 'nfs', '--limit', '1000']);
  expect(table.status).toBe(0);
  const lines = table.stdout.trim().split('\n');
  expect(lines[0]).toMatch(/^ID +NAME +TYPE +HOST +PORT +PATH +AGENT_ID +AGENT_POOL$/);
  expect(lines.filter((l) => l.includes(`nfs ${run}`))).toHaveLength(5);
  // Paged with --all: one header and every row, each page written as it arrives (the widths are
  // set by the first page, so compare cells rather than spacing).
  const cells = (text: string[]) => text.map((l) => l.split(/ {2,}/));
  const paged = xfer(['connections', 'list', '--type', 'nfs', '--all', '--limit', '2']).stdout.trim().split('\n');
  expect(cells(paged)).toEqual(cells(lines));
});

test('exit code 5 on a duplicate name and 4 on an unknown id, the server error as one stderr line', async () => {
  const name = `dup ${run}`;
  json(['connections', 'create', '--name', name, '--type', 'nfs', '--host', 'nfs.example.test']);
  const api = await stack.api.call('POST', '/connections', { name, type: 'nfs', host: 'nfs.example.test' });
  expect(api.status).toBe(409);

  const dup = xfer(['connections', 'create', '--name', name, '--type', 'nfs', '--host', 'nfs.example.test']);
  expect(dup.status).toBe(5);
  expect(dup.stdout).toBe('');
  expect(dup.stderr).toBe(`Error: ${api.body.error}\n`);
  const dupJson = xfer(['connections', 'create', '--name', name, '--type', 'nfs', '--host', 'nfs.example.test', '--json']);
  expect(dupJson.status).toBe(5);
  expect(dupJson.stderr.split('\n').filter(Boolean)).toHaveLength(1);
  expect(JSON.parse(dupJson.stderr)).toEqual({ error: api.body.error });

  const unknown = '0123456789abcdef01234567';
  for (const args of [['connections', 'get', unknown], ['connections', 'delete', unknown], ['connections', 'update', unknown, '--name', 'x']]) {
    const res = xfer(args);
    expect(res.status).toBe(4);
    expect(res.stderr.split('\n').filter(Boolean)).toHaveLength(1);
  }
  expect(JSON.parse(xfer(['connections', 'get', unknown, '--json']).stderr)).toEqual({ error: expect.any(String) });
});

test('usage errors exit 2 before any request: bad flag value, unknown type, bad credentials JSON, missing required flag', () => {
  const cases: [string[], string][] = [
    [['connections', 'list', '--limit', 'abc'], ''],
    [['connections', 'create', '--name', 'x', '--type', 'floppy'], ''],
    [['connections', 'create', '--name', 'x', '--type', 'sftp', '--host', 'h', '--credentials-stdin'], 'not json'],
    [['connections', 'create', '--type', 'nfs'], ''],
    [['connections', 'update', '0123456789abcdef01234567'], ''],
  ];
  for (const [args, input] of cases) {
    const res = xfer(args, input);
    expect({ args, status: res.status }).toEqual({ args, status: 2 });
    expect(res.stderr.split('\n').filter(Boolean)).toHaveLength(1);
    const js = xfer([...args, '--json'], input);
    expect(js.status).toBe(2);
    expect(Object.keys(JSON.parse(js.stderr))).toEqual(['error']);
  }
});

test('api-keys create, list and revoke; a revoked key is refused with exit code 3', () => {
  const created = json<{ id: string; key: string; scopes: string[] }>(['api-keys', 'create', '--name', `ci ${run}`, '--scope', 'connections:read']);
  expect(created.scopes).toEqual(['connections:read']);
  const until = new Date(Date.now() + 3600_000).toISOString();
  expect(json(['api-keys', 'create', '--name', `hour ${run}`, '--scope', 'connections:read', '--expires-at', until])).toMatchObject({ expires_at: until });
  const listed = json<{ id: string }[]>(['api-keys', 'list', '--all']);
  expect(listed.map((k) => k.id)).toContain(created.id);
  expect(listed.find((k) => k.id === created.id)).not.toHaveProperty('key');

  const spare = mkdtempSync(join(tmpdir(), 'xfer-cli-spare-'));
  const asKey = (args: string[]) => runCli(args, { env: cliEnv(spare, { XDG_CONFIG_HOME: spare, XFER_API_KEY: created.key, XFER_URL: stack.url }) });
  try {
    expect(asKey(['connections', 'list']).status).toBe(0);
    const forbidden = asKey(['connections', 'create', '--name', `no ${run}`, '--type', 'nfs', '--host', 'h']);
    expect(forbidden.status).toBe(3);
    expect(json(['api-keys', 'revoke', created.id])).toEqual({ id: created.id, deleted: true });
    expect(asKey(['connections', 'list']).status).toBe(3);
    expect(xfer(['api-keys', 'revoke', created.id]).status).toBe(4);
  } finally {
    rmSync(spare, { recursive: true, force: true });
  }
});
