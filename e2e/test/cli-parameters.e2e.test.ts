import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, type Stack } from '../src/stack.js';
import { cliEnv, jsonFailure, jsonOf, startCli, type CliFailure, type CliRun } from './support/cli.js';

/**
 * `xfer parameters …` run as the built binary against a real control plane, and a parameter
 * used in the paths of `xfer transfers create` (rendered by the server when the transfer is created).
 */
const run = randomBytes(3).toString('hex');
let stack: Stack;
let home: string;

interface Opts { input?: string }
const xfer = (args: string[], o: Opts = {}): Promise<CliRun> => startCli(args, { env: cliEnv(home), input: o.input });
const json = async <T = any>(args: string[], o: Opts = {}): Promise<T> => jsonOf<T>(await xfer([...args, '--json'], o));

/** A failure with --json: the exit code and the error (support/cli.ts `jsonFailure`). */
const fails = async (args: string[], opts: Opts = {}): Promise<CliFailure> => jsonFailure(await xfer([...args, '--json'], opts));

beforeAll(async () => {
  stack = await startStack({ env: process.env });
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-parameters-'));
  const login = await xfer(['auth', 'login', '--url', stack.url], { input: stack.api.token });
  if (login.status !== 0) throw new Error(login.stderr);
}, 120_000);

afterAll(async () => {
  if (home) rmSync(home, { recursive: true, force: true });
  await stack?.stop();
}, 60_000);

test('parameters: create, get (by id or name), list (table and --all --json), update, delete; a taken name is exit 5, an unknown id exit 4', async () => {
  const name = `region_${run}`;
  const created = await json(['parameters', 'create', '--name', name, '--value', 'eu-west', '--description', 'where reports land']);
  expect(created).toMatchObject({ name, value: 'eu-west', secret: false, has_value: true, description: 'where reports land' });
  expect(await json(['parameters', 'get', created.id])).toEqual(created);
  expect(await stack.api.data('GET', `/parameters/${created.id}`)).toEqual(created);
  expect((await json<{ id: string }[]>(['parameters', 'list', '--all'])).map((p) => p.id)).toContain(created.id);
  const table = await xfer(['parameters', 'list']);
  expect(table.status).toBe(0);
  expect(table.stdout).toMatch(new RegExp(`^${created.id} +${name} +eu-west +where reports land`, 'm'));

  // By name as well as by id (looked up with GET /parameters?name=).
  expect(await json(['parameters', 'get', name])).toEqual(created);
  expect(await fails(['parameters', 'get', `missing_${run}`])).toEqual({ status: 4, error: `No parameter with the id or name "missing_${run}"` });
  const updated = await json(['parameters', 'update', name, '--value', 'us-east']);
  expect(updated).toMatchObject({ id: created.id, value: 'us-east' });
  expect(await fails(['parameters', 'create', '--name', name, '--value', 'x'])).toEqual({ status: 5, error: `name: a parameter named '${name}' already exists` });

  expect(await json(['parameters', 'delete', created.id])).toEqual({ id: created.id, deleted: true });
  expect((await fails(['parameters', 'get', created.id])).status).toBe(4);
  expect((await stack.api.call('GET', `/parameters/${created.id}`)).status).toBe(404);
}, 60_000);

test('a secret value is piped on stdin, never shown, and refused on the command line before any call', async () => {
  const name = `token_${run}`;
  const value = `sekrit-${randomBytes(12).toString('hex')}`;
  const human = await xfer(['parameters', 'create', '--name', name, '--secret', '--value-stdin'], { input: `${value}\n` });
  expect(human.status).toBe(0);
  expect(human.stdout + human.stderr).not.toContain(value);
  const listed = await xfer(['parameters', 'list']);
  expect(listed.stdout).toMatch(new RegExp(`${name} +\\(secret\\)`));
  expect(listed.stdout).not.toContain(value);
  const stored = (await json<Array<{ id: string; name: string }>>(['parameters', 'list', '--all'])).find((p) => p.name === name)!;
  expect(await json(['parameters', 'get', stored.id])).toMatchObject({ value: null, secret: true, has_value: true });

  const onCommandLine = await fails(['parameters', 'create', '--name', `${name}_2`, '--secret', '--value', value]);
  expect(onCommandLine.status).toBe(2);
  expect(onCommandLine.error).toMatch(/--value-stdin/);
  expect((await stack.api.data<Array<{ name: string }>>('GET', '/parameters?limit=1000')).map((p) => p.name)).not.toContain(`${name}_2`);

  // Made plain again only with a new value: the secret one is never revealed.
  const plain = await fails(['parameters', 'update', stored.id, '--no-secret']);
  expect(plain).toEqual({ status: 2, error: 'value is required when secret changes to false (a secret value is never made readable)' });
}, 60_000);

test('bad input: the server names the field (exit 2); nothing to update is exit 2 before any call', async () => {
  const api = await stack.api.call('POST', '/parameters', { name: '9lives', value: 'x' });
  expect(api.status).toBe(400);
  expect(await fails(['parameters', 'create', '--name', '9lives', '--value', 'x'])).toEqual({ status: 2, error: api.body.error });
  expect((await fails(['parameters', 'update', '0123456789abcdef01234567'])).status).toBe(2);
  expect((await fails(['parameters', 'create', '--name', `novalue_${run}`])).status).toBe(2);
}, 60_000);

test('a transfer created by the CLI has its paths rendered with the parameter by the server', async () => {
  const name = `site_${run}`;
  await json(['parameters', 'create', '--name', name, '--value', 'berlin']);
  const conn = await stack.api.data<{ id: string }>('POST', '/connections', { name: `nfs-${run}`, type: 'nfs', host: '127.0.0.1', path: '/export' });
  const transfer = await json(['transfers', 'create', '--source', conn.id, '--source-path', `/in/{{params.${name}}}`, '--dest', conn.id, '--dest-path', '/out/{{run.id}}']);
  expect(transfer).toMatchObject({ sourcePath: '/in/berlin', destinationPath: `/out/${transfer.id}` });
  const unknown = await fails(['transfers', 'create', '--source', conn.id, '--source-path', '/in/{{params.nope}}', '--dest', conn.id, '--dest-path', '/out']);
  expect(unknown).toEqual({ status: 2, error: 'body.sourcePath names the parameter "nope", which does not exist' });
}, 60_000);
