import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Readable } from 'node:stream';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultCacheDir } from '@xfer/control-plane';
import { SCOPES } from '@xfer/shared';
import { Api, startStack, type Stack } from '../src/stack.js';
import { uploadFile } from '../src/tools/file-transfer.js';
import { ensureSchemathesis } from '../src/tools/schemathesis.js';
import { FIXTURES } from './support/connections.js';

/**
 * The API fuzzed by schemathesis (PyPI, pinned in e2e/src/tools/schemathesis.ts) with its own
 * OpenAPI document, against the real stack: `xfer-server` on the test database with clamd for
 * uploads, and a real agent for connection tests and transfers, with a few real resources for the
 * ids in lists to lead somewhere. Every operation of the document is run with an all-scopes key in
 * bounded phases (examples, coverage, fuzzing, stateful along the document's links), then the
 * console-only ones (settings) with a console session. Each run fails with
 * schemathesis' report on any response >= 500 (but a 503 naming an offline agent: the fuzzer's
 * own agents have no process behind them), any 4xx that is not exactly `{"error": string}`
 * (support/schemathesis-hooks.py), any answer that contradicts the document (status codes,
 * content types, the response schemas routes declare), and any request the document forbids that
 * is not refused (support/schemathesis.toml).
 */
const SUPPORT = join(dirname(fileURLToPath(import.meta.url)), 'support');
const HOOKS = join(SUPPORT, 'schemathesis-hooks.py');
const CONFIG = join(SUPPORT, 'schemathesis.toml');
/**
 * Test cases per operation and phase, and the time budgets of the two runs (every operation with
 * a key; the console-only settings with a session): the file stays under 3 minutes on a busy
 * 2-core machine.
 */
const MAX_EXAMPLES = 15;
const KEY_RUN_SECONDS = 90;
const SESSION_RUN_SECONDS = 25;
const CHECKS = [
  'no_server_error', 'error_body_is_error_only', 'status_code_conformance', 'content_type_conformance', 'response_schema_conformance',
  'negative_data_rejection',
];

let stack: Stack;
let st: string;
let dir: string;
let schemaFile: string;
let operations: number;

beforeAll(async () => {
  if (!process.env.XFER_TEST_CLAMD) throw new Error('XFER_TEST_CLAMD is not set: run through jest (its global setup starts clamd)');
  dir = mkdtempSync(join(tmpdir(), 'xfer-fuzz-'));
  st = await ensureSchemathesis({ cacheDir: defaultCacheDir(process.env), env: process.env, log: (msg) => process.stderr.write(`${msg}\n`) });
  stack = await startStack({
    env: process.env,
    serverEnv: {
      XFER_CLAMD: process.env.XFER_TEST_CLAMD,
      // The fuzzer is one client sending as fast as it can: a 429 would only hide routes from it.
      XFER_RATE_LIMIT_PER_MINUTE: '1000000',
      // Its failed logins would lock the test's own address out of the console-session login below
      // (the sign-in lockout counts per address); the lockout has tests of its own.
      XFER_LOGIN_LOCK_IP_AFTER: '100000',
      // Connection tests of fuzzed hosts wait for the agent's answer; keep each bounded.
      XFER_AGENT_REQUEST_TIMEOUT_MS: '5000',
      // A test email to a fuzzed SMTP host that never answers is waited for; keep it under the fuzzer's request timeout.
      XFER_SMTP_TIMEOUT_MS: '5000',
    },
  });
  await stack.startAgent('fuzz-agent');
  await seed();
  const text = await (await fetch(`${stack.url}/openapi.json`)).text();
  const document = JSON.parse(text) as { paths: Record<string, Record<string, unknown>> };
  operations = Object.values(document.paths).reduce((n, ops) => n + Object.keys(ops).length, 0);
  // Given the document's URL, schemathesis would leave out the operation serving it: a file keeps it in.
  schemaFile = join(dir, 'openapi.json');
  writeFileSync(schemaFile, text);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * Real resources behind the ids schemathesis sees in list responses and reuses: connections to the
 * sftp and s3 test servers, a transfer between them (run once), a watcher of the sftp folder, an
 * uploaded file with a share link.
 * Without them every route that takes an id answers only 404s (generated connection bodies rarely
 * pass the per-type checks).
 */
async function seed(): Promise<void> {
  const place = `e2e-fuzz-${randomBytes(4).toString('hex')}`;
  const sftp = FIXTURES.sftp!;
  const s3 = FIXTURES.s3!;
  await sftp.prepare(place);
  await s3.prepare(place);
  writeFileSync(join(process.env.XFER_TEST_SFTP_ROOT!, place, 'seed.txt'), 'fuzz seed\n');
  const from = await stack.api.data<{ id: string }>('POST', '/connections', { name: 'fuzz sftp', ...sftp.body(place) });
  const to = await stack.api.data<{ id: string }>('POST', '/connections', { name: 'fuzz s3', ...s3.body(place) });
  const job = await stack.api.data<{ id: string }>('POST', '/transfers', {
    name: 'fuzz seed', sourceConnectionId: from.id, sourcePath: '/', destinationConnectionId: to.id, destinationPath: '/copy',
  });
  expect((await stack.api.call('POST', `/transfers/${job.id}/execute`)).body).toMatchObject({ success: true });
  await stack.api.data('POST', '/watchers', {
    name: 'fuzz watcher', connectionId: from.id, path: '/', action: { transfer: { destinationConnectionId: to.id, destinationPath: '/watched' } },
  });
  const content = Buffer.from('fuzz seed\n');
  const file = await uploadFile(stack.url, stack.api.token, { name: 'seed.txt', size: content.length, content: Readable.from([content]) });
  expect(file.status).toBe(201);
  await stack.api.data('POST', `/files/${file.body.data.id}/share`, {});
}

/** Runs `st run` on the document; resolves with its report, throws it when schemathesis found anything. */
function fuzz(args: string[], env: Record<string, string>): Promise<string> {
  const argv = [
    '--config-file', CONFIG, 'run', schemaFile, '--url', new URL(stack.url).origin,
    '--checks', CHECKS.join(','),
    '--max-examples', String(MAX_EXAMPLES),
    // One worker: with threads, Python 3.11 (Debian 12's) sometimes fails hypothesis' ast.parse
    // ("AST constructor recursion depth mismatch", CPython issue 106905), an error of the run, not of the API.
    '--workers', '1',
    '--request-timeout', '30',
    '--suppress-health-check', 'all',
    '--no-color',
    ...args,
  ];
  return new Promise((resolvePromise, reject) => {
    const child = spawn(st, argv, { cwd: dir, env: { ...process.env, SCHEMATHESIS_HOOKS: HOOKS, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (d: Buffer) => (output = (output + d.toString()).slice(-200_000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolvePromise(output);
      else reject(new Error(`schemathesis exited ${code}:\n${output.slice(-30_000)}`));
    });
  });
}

test('with an all-scopes key, every operation: no server error, every 4xx exactly {error}, every answer as documented', async () => {
  const created = await stack.api.data<{ id: string; key: string }>('POST', '/api-keys', { name: 'fuzz', scopes: [...SCOPES] });
  const keys = await stack.api.data<Array<{ id: string }>>('GET', '/api-keys');
  expect(operations).toBeGreaterThan(50);
  const output = await fuzz([
    '--header', `Authorization: Bearer ${created.key}`, '--phases', 'examples,coverage,fuzzing,stateful', '--max-time', String(KEY_RUN_SECONDS),
  ], {
    // Neither the fuzzing key nor the bootstrap key may be revoked mid-run (see the hooks).
    XFER_FUZZ_PROTECTED_KEY_IDS: keys.map((k) => k.id).join(','),
  });
  // Every operation was run, and the key held to the end.
  expect(output).toMatch(new RegExp(`Selected: ${operations}/${operations}\\b`));
  expect(output).toMatch(new RegExp(`Tested: ${operations}\\b`));
  expect((await new Api(stack.url, created.key).call('GET', '/api-keys')).status).toBe(200);
}, 150_000);

test('with a console session, the console-only settings: the same checks', async () => {
  const email = `fuzz-${randomBytes(4).toString('hex')}@example.test`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  // An admin: a key creates users up to admin (only an owner makes owners).
  await stack.api.data('POST', '/users', { email, password, role: 'admin', name: 'fuzz' });
  const session = await new Api(stack.url, '').call<{ data: { token: string } }>('POST', '/auth/login', { email, password });
  expect(session.status).toBe(200);
  // The settings create nothing another operation reads: no links, so no stateful phase.
  const output = await fuzz([
    '--include-path-regex', '^/api/v1/settings/', '--phases', 'examples,coverage,fuzzing', '--max-time', String(SESSION_RUN_SECONDS),
  ], {
    XFER_FUZZ_SESSION_TOKEN: session.body.data.token, XFER_FUZZ_LOGIN_EMAIL: email, XFER_FUZZ_LOGIN_PASSWORD: password,
  });
  expect(output).toMatch(/Tested: 1[0-9]\b/);
  // Only an owner may change the plan (control-plane/test/plan.test.ts runs it as one): for this
  // admin session PUT /settings/plan is 403 whatever is sent, the one operation allowed to be
  // reported as answering only 403. Any other would mean the session stopped working.
  const warning = output.split('Authentication failed')[1]?.split('Ensure valid authentication')[0] ?? '';
  const onlyRefused = warning.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('- '));
  expect(onlyRefused).toEqual(output.includes('Authentication failed') ? ['- PUT /api/v1/settings/plan'] : []);
}, 60_000);
