import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { buildApp, type App } from '../src/app.js';
import { parseConfig, type Config } from '../src/config.js';
import { bootstrapAccount } from '../src/plugins/app/access/bootstrap.js';
import type { Plan } from '@xfer/shared';
import { Types, type Model } from 'mongoose';
import type { AttemptStore } from '../src/lib/attempt-claim.js';
import { eventually } from './protocol-client.js';

/**
 * Integration-test harness: a real app on the real database named by MONGODB_URI (started by
 * jest's global setup through `npm run services`), in a database of its own that is dropped on close
 * (unless `overrides.databaseName` shares another app's database).
 */
/**
 * One master key for every app of a test file, as every instance of a deployment shares one:
 * a second instance on the same database must open what the first sealed (the session and audit
 * keys among them). Tests of key rotation pass their own `masterKeys`.
 */
const MASTER_KEY = randomBytes(32).toString('base64');

export async function buildTestApp(overrides: Partial<Config> = {}, options: { dropDatabase?: boolean; logs?: string[] } = {}): Promise<App> {
  const uri = process.env.MONGODB_URI;
  if (!uri) throw new Error('MONGODB_URI is not set: run tests through `npm test` (it starts the database)');
  const dataDir = mkdtempSync(join(tmpdir(), 'xfer-test-'));
  const config = parseConfig({
    MONGODB_URI: uri,
    XFER_DB_NAME: `xfer_test_${randomBytes(6).toString('hex')}`,
    XFER_DATA_DIR: dataDir,
    XFER_MASTER_KEY: MASTER_KEY,
    XFER_LOG_LEVEL: 'silent',
  });
  // `logs`: every line the app's own logger would write, at every level, for tests of what is logged.
  const logs = options.logs;
  const app = logs
    ? await buildApp({ ...config, logLevel: 'trace', ...overrides }, { logStream: { write: (line) => void logs.push(line) } })
    : await buildApp({ ...config, ...overrides }, { logger: false });
  app.addHook('onClose', async () => {
    // A second instance on the database of another (overrides.databaseName) leaves it to that one.
    if (options.dropDatabase ?? !overrides.databaseName) await app.dbConnection.dropDatabase().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  });
  await app.ready();
  return app;
}

export interface TestAccount {
  accountId: string;
  userId: string;
  /** All-scopes key of the owner. */
  apiKey: string;
  email: string;
  password: string;
}

let seq = 0;

/** A fresh account with its owner and an all-scopes key (team plan unless told). */
export async function createAccount(app: App, plan: Plan = 'team'): Promise<TestAccount> {
  const email = `owner${++seq}-${randomBytes(4).toString('hex')}@example.test`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  const result = await bootstrapAccount(app.db, app.vault, { email, password, plan });
  return { accountId: result.account_id, userId: result.user_id, apiKey: result.api_key, email, password };
}

export const auth = (token: string) => ({ authorization: `Bearer ${token}` });

/** Creates a key with exactly `scopes` using the all-scopes key `apiKey`. */
export async function createKey(app: App, apiKey: string, scopes: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(apiKey), payload: { name: 'test key', scopes, ...extra } });
  if (res.statusCode !== 201) throw new Error(`createKey: ${res.statusCode} ${res.body}`);
  return res.json().data.key as string;
}

/** Logs in and returns a session token. */
export async function login(app: App, email: string, password: string): Promise<string> {
  const res = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password } });
  if (res.statusCode !== 200) throw new Error(`login: ${res.statusCode} ${res.body}`);
  return res.json().data.token as string;
}

/** Asserts an error response: status and the `{error}`-only body. */
export function expectError(res: LightMyRequestResponse, status: number, message?: string | RegExp): void {
  expect({ status: res.statusCode, body: res.body }).toMatchObject({ status });
  const body = res.json();
  expect(Object.keys(body)).toEqual(['error']);
  expect(typeof body.error).toBe('string');
  if (typeof message === 'string') expect(body.error).toBe(message);
  else if (message) expect(body.error).toMatch(message);
}

const passLogs = new WeakMap<object, Map<string, { begun: number; ended: number[] }>>();

/**
 * Resolves once `owner[method]`, the pass a loop runs (lib/loop.ts calls it anew each time), has
 * run `n` whole times that began after this call: the bounded signal of "a loop went over it
 * again and did nothing". The first call for an owner and method wraps the method on the owner.
 */
export async function loopPasses(owner: object, method: string, n: number): Promise<void> {
  let logs = passLogs.get(owner);
  if (!logs) passLogs.set(owner, (logs = new Map()));
  let log = logs.get(method);
  if (!log) {
    const entry = { begun: 0, ended: [] as number[] };
    const target = owner as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const pass = target[method]!.bind(owner);
    target[method] = async (...args: unknown[]) => {
      const n = ++entry.begun;
      try {
        return await pass(...args);
      } finally {
        entry.ended.push(n);
      }
    };
    logs.set(method, (log = entry));
  }
  const { begun, ended } = log;
  await eventually(async () => ended.filter((pass) => pass > begun).length >= n, `${n} passes of ${method}`);
}

/**
 * Resolves once nothing more can be sent for the account through `store` (the webhook or the
 * notification deliverer's, lib/attempt-claim.ts): its outbox events are fanned out, none of its
 * deliveries (those `filter` selects) is pending (a final status is never attempted again) and
 * every attempt is recorded. A receiver records a request before it answers, and an attempt is
 * recorded after its answer (or its timeout), so from then on what a receiver holds is all it gets.
 */
export function settledDeliveries(on: App, accountId: string, store: AttemptStore, filter: Record<string, unknown> = {}): Promise<true> {
  const account_id = new Types.ObjectId(accountId);
  return eventually(async () => {
    if ((await on.db.outboxEvents.countDocuments({ account_id, status: 'pending' })) > 0) return false;
    const docs = await (store.deliveries as Model<{ status: string }>).find({ account_id, ...filter }, { status: 1 }).lean();
    if (docs.some((d) => d.status === 'pending')) return false;
    return (await store.attempts.countDocuments({ delivery_id: { $in: docs.map((d) => d._id) }, finished_at: null })) === 0;
  }, 'nothing left to send');
}
