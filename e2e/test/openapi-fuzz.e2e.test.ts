import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultCacheDir } from '@xfer/control-plane';
import { SCOPES } from '@xfer/shared';
import { startStack, type Stack } from '../src/stack.js';
import { ensureSchemathesis } from '../src/tools/schemathesis.js';

/**
 * The API fuzzed by schemathesis (PyPI, pinned in e2e/src/tools/schemathesis.ts) with its own
 * OpenAPI document, against the real stack: `xfer-server` on the test database with clamd for
 * uploads, and a real agent for connection tests and transfers. Every operation of the document is
 * run with an all-scopes key, in bounded phases (examples, coverage, fuzzing). It fails with
 * schemathesis' report on any response >= 500 (but a 503 naming an offline agent: the fuzzer's
 * own agents have no process behind them), any 4xx that is not exactly `{"error": string}`
 * (support/schemathesis-hooks.py), and any answer that contradicts the document (status codes,
 * content types, the response schemas routes declare).
 */
const HOOKS = join(dirname(fileURLToPath(import.meta.url)), 'support', 'schemathesis-hooks.py');
/** Test cases per operation and phase, and the time budget of the whole run: the file stays under 3 minutes on a busy 2-core machine. */
const MAX_EXAMPLES = 15;
const MAX_SECONDS = 100;
const CHECKS = [
  'no_server_error', 'error_body_is_error_only', 'status_code_conformance', 'content_type_conformance', 'response_schema_conformance',
];

let stack: Stack;
let st: string;
let dir: string;

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
      // Connection tests of fuzzed hosts wait for the agent's answer; keep each bounded.
      XFER_AGENT_REQUEST_TIMEOUT_MS: '5000',
    },
  });
  await stack.startAgent('fuzz-agent');
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function runSchemathesis(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(st, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (d: Buffer) => (output = (output + d.toString()).slice(-200_000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', reject);
    child.on('exit', (code) => resolvePromise({ code, output }));
  });
}

test('schemathesis finds no server error, no 4xx outside {error} and no answer the document does not describe', async () => {
  const created = await stack.api.data<{ id: string; key: string }>('POST', '/api-keys', { name: 'fuzz', scopes: [...SCOPES] });
  const keys = await stack.api.data<Array<{ id: string }>>('GET', '/api-keys');
  const text = await (await fetch(`${stack.url}/openapi.json`)).text();
  const document = JSON.parse(text) as { paths: Record<string, Record<string, unknown>> };
  const operations = Object.values(document.paths).reduce((n, ops) => n + Object.keys(ops).length, 0);
  expect(operations).toBeGreaterThan(50);
  // Given the document's URL, schemathesis would leave out the operation serving it: a file keeps it in.
  const schemaFile = join(dir, 'openapi.json');
  writeFileSync(schemaFile, text);

  const { code, output } = await runSchemathesis([
    'run', schemaFile, '--url', new URL(stack.url).origin,
    '--header', `Authorization: Bearer ${created.key}`,
    '--checks', CHECKS.join(','),
    '--phases', 'examples,coverage,fuzzing,stateful',
    '--max-examples', String(MAX_EXAMPLES),
    '--max-time', String(MAX_SECONDS),
    '--workers', '2',
    '--request-timeout', '30',
    '--suppress-health-check', 'all',
    '--no-color',
  ], {
    ...process.env,
    SCHEMATHESIS_HOOKS: HOOKS,
    // Neither the fuzzing key nor the bootstrap key may be revoked mid-run (see the hooks).
    XFER_FUZZ_PROTECTED_KEY_IDS: keys.map((k) => k.id).join(','),
  });
  if (code !== 0) throw new Error(`schemathesis exited ${code}:\n${output.slice(-30_000)}`);
  // Every operation of the document was run, none skipped or errored.
  expect(output).toMatch(new RegExp(`Selected: ${operations}/${operations}\\b`));
  expect(output).toMatch(new RegExp(`Tested: ${operations}\\b`));
  expect(output).not.toMatch(/\berrors?\b.* in [\d.]+s =+$/m);
}, 175_000);
