import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Env } from './services/types.js';

/**
 * The real xfer binaries, started as a user starts them, for e2e tests and benchmarks: a control
 * plane on a database of its own (or a cluster: several `xfer-server start` over that one
 * database), an account made with `xfer-server bootstrap`, and agents made through the API and
 * started with `xfer-agent start`, given every instance's URL.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const BINARIES = {
  server: join(ROOT, 'control-plane/dist/bin/xfer-server.js'),
  agent: join(ROOT, 'agent/dist/bin/xfer-agent.js'),
  cli: join(ROOT, 'cli/dist/bin/xfer.js'),
} as const;

/** A spawned binary with its output kept for failure messages. */
export interface Proc {
  child: ChildProcess;
  output: () => string;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
}

export function spawnNode(script: string, args: string[], env: Env): Proc {
  return spawnProc(process.execPath, [script, ...args], env);
}

/** A spawned executable (say, the single-file agent) with its output kept, as `spawnNode`. */
export function spawnProc(command: string, args: string[], env: Env): Proc {
  const child = spawn(command, args, { env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => {
    out += d.toString();
    // Keep the tail only: a long run must not grow the test's memory.
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | string>((res) => child.once('exit', (code, signal) => res(code ?? signal ?? 'unknown')));
  return { child, output: () => out, exited };
}

/** Waits until `test(output)` holds; rejects when the process exits first or after `timeoutMs`. */
export async function waitForOutput(proc: Proc, test: (out: string) => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exit: number | string | undefined;
  void proc.exited.then((code) => (exit = code));
  while (!test(proc.output())) {
    if (exit !== undefined) throw new Error(`process exited (${exit}) before it was ready:\n${proc.output()}`);
    if (Date.now() > deadline) throw new Error(`process not ready within ${timeoutMs} ms:\n${proc.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function stopProc(proc: Proc, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | string> {
  if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill(signal);
  return proc.exited;
}

/** A JSON API client for one base URL and bearer token. */
export class Api {
  constructor(readonly baseUrl: string, readonly token: string) {}

  async call<T = any>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const send = () => fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let res: Response;
    try {
      res = await send();
    } catch (err) {
      // A kept-alive connection the server closed while this process was blocked (tests run the
      // CLI with spawnSync, for longer than the server's keep-alive timeout) fails the next request
      // on it before any answer: an idempotent request is sent again, on a new connection, as a
      // browser does. Anything else is the test's failure.
      const code = ((err as Error).cause as { code?: string } | undefined)?.code;
      if (code !== 'UND_ERR_SOCKET' || !['GET', 'HEAD', 'PUT', 'DELETE'].includes(method)) throw err;
      res = await send();
    }
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
  }

  /** The `data` of a call that must answer `expected`; throws with the body otherwise. */
  async data<T = any>(method: string, path: string, body?: unknown, expected = method === 'POST' ? 201 : 200): Promise<T> {
    const res = await this.call<{ data: T; error?: string }>(method, path, body);
    if (res.status !== expected) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data;
  }
}

export interface StackOptions {
  /** Environment with MONGODB_URI (the test services) and anything else the binaries should see. */
  env: Env;
  /** Extra control-plane settings (e.g. a short job lease), for every instance. */
  serverEnv?: Record<string, string>;
  /**
   * Control-plane instances over the one database (default 1), each on a port of its own, all
   * with the same `XFER_MASTER_KEY` and database name; the first is started alone (it builds the
   * indexes), the others then together.
   */
  instances?: number;
  /**
   * Settings of one instance only, given its index and base URL (known before it starts): e.g.
   * the URL its peers reach it at for relays (`XFER_INSTANCE_URL`); on loopback the default does.
   */
  instanceEnv?: (index: number, url: string) => Record<string, string>;
}

/** A control plane (one instance or several) with an owner's all-scopes API key. */
export interface Stack {
  /** The first instance's base URL (`http://127.0.0.1:PORT/api/v1`). */
  url: string;
  /** Every instance's base URL, by index; agents are started with all of them. */
  urls: string[];
  /** The API on the first instance. */
  api: Api;
  /** The API on each instance, by index (the same account and key: they share the database). */
  apis: Api[];
  /** The first instance's process. */
  server: Proc;
  /** Each instance's current process, by index (a restart replaces it). */
  servers: Proc[];
  /** The first instance's environment (the others differ by port and `instanceEnv`). */
  serverEnv: Env;
  agents: Proc[];
  /**
   * Creates an agent through the API and starts `xfer-agent` with its token; resolves once it is
   * online. `instances`: the indexes of the instances whose URLs it is given (default: all of them).
   */
  startAgent(name?: string, extraEnv?: Record<string, string>, args?: string[], instances?: number[]): Promise<{ id: string; token: string; proc: Proc }>;
  /** Starts the agent binary with a given token (e.g. a revoked or wrong one); `instances` as for `startAgent`. */
  spawnAgent(token: string, extraEnv?: Record<string, string>, args?: string[], instances?: number[]): Proc;
  waitForAgent(id: string, status: 'online' | 'offline', timeoutMs?: number): Promise<void>;
  /** kill -9 of a control-plane instance, the first by default (an outage: no shutdown, no goodbye to the agents). */
  killServer(index?: number): Promise<void>;
  /** Starts an instance again, on the same port and database; `servers[index]` is then the new process. */
  restartServer(index?: number): Promise<void>;
  /** The API of the first instance whose process runs (while another one is killed). */
  liveApi(): Api;
  stop(): Promise<void>;
}

/** A free TCP port on loopback (closed again at once: the instance binds it moments later). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((res, rej) => server.once('error', rej).listen(0, '127.0.0.1', res));
  const { port } = server.address() as { port: number };
  await new Promise((res) => server.close(res));
  return port;
}

const LISTENING = /listening on (http:\/\/\S+\/api\/v1)/;

export async function startStack(opts: StackOptions): Promise<Stack> {
  if (!opts.env.MONGODB_URI) throw new Error('startStack needs MONGODB_URI (npm run services -- up mongodb)');
  const count = opts.instances ?? 1;
  if (!Number.isInteger(count) || count < 1) throw new Error(`startStack: instances must be a positive integer, not ${count}`);
  const dataDir = mkdtempSync(join(tmpdir(), 'xfer-stack-'));
  const serverEnv: Env = {
    ...opts.env,
    XFER_DB_NAME: `xfer_e2e_${randomBytes(6).toString('hex')}`,
    XFER_DATA_DIR: dataDir,
    XFER_MASTER_KEY: randomBytes(32).toString('base64'),
    XFER_PORT: '0',
    XFER_LOG_LEVEL: 'warn',
    ...opts.serverEnv,
  };
  const boot = spawnSync(process.execPath, [BINARIES.server, 'bootstrap', '--email', `e2e-${randomBytes(4).toString('hex')}@example.test`,
    '--password', randomBytes(12).toString('hex'), '--plan', 'enterprise', '--json'], { env: serverEnv as NodeJS.ProcessEnv, encoding: 'utf8' });
  if (boot.status !== 0) throw new Error(`bootstrap failed (${boot.status}): ${boot.stderr}`);
  const { api_key: apiKey } = JSON.parse(boot.stdout) as { api_key: string };

  // One instance listens where the system puts it; a cluster's ports are chosen first, so that each
  // instance's URL is known before it starts (instanceEnv) and a restart finds its port again.
  const ports = count === 1 && !opts.instanceEnv ? [0] : await Promise.all(Array.from({ length: count }, freePort));
  const envOf = (index: number, port: number): Env => ({
    ...serverEnv, XFER_PORT: String(port), ...opts.instanceEnv?.(index, `http://127.0.0.1:${port}/api/v1`),
  });
  const startInstance = async (index: number, port: number): Promise<Proc> => {
    const proc = spawnNode(BINARIES.server, ['start'], envOf(index, port));
    await waitForOutput(proc, (out) => LISTENING.test(out));
    return proc;
  };
  const servers: Proc[] = [await startInstance(0, ports[0]!)];
  servers.push(...await Promise.all(ports.slice(1).map((port, i) => startInstance(i + 1, port))));
  const urls = servers.map((proc) => LISTENING.exec(proc.output())![1]!);
  const url = urls[0]!;
  const apis = urls.map((u) => new Api(u, apiKey));
  const api = apis[0]!;
  const agents: Proc[] = [];
  const liveApi = () => apis.find((_, i) => servers[i]!.child.exitCode === null && servers[i]!.child.signalCode === null) ?? api;

  const spawnAgent = (token: string, extraEnv: Record<string, string> = {}, args: string[] = [], instances = urls.map((_, i) => i)) => {
    const given = instances.map((i) => {
      if (!urls[i]) throw new Error(`spawnAgent: no instance ${i} (the stack has ${urls.length})`);
      return urls[i];
    });
    const proc = spawnNode(BINARIES.agent, ['start', ...given.flatMap((u) => ['--url', u]), ...args], { ...opts.env, XFER_AGENT_TOKEN: token, XFER_LOG_LEVEL: 'info', ...extraEnv });
    agents.push(proc);
    return proc;
  };

  const waitForAgent = async (id: string, status: 'online' | 'offline', timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const agent = await liveApi().data<{ status: string }>('GET', `/agents/${id}`);
      if (agent.status === status) return;
      if (Date.now() > deadline) throw new Error(`agent ${id} not ${status} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  return {
    url, urls, api, apis, serverEnv, agents, spawnAgent, waitForAgent, liveApi,
    get server() {
      return servers[0]!;
    },
    get servers() {
      return [...servers];
    },
    async killServer(index = 0) {
      await stopProc(servers[index]!, 'SIGKILL');
    },
    async restartServer(index = 0) {
      servers[index] = await startInstance(index, Number(new URL(urls[index]!).port));
    },
    async startAgent(name = `agent-${randomBytes(3).toString('hex')}`, extraEnv = {}, args = [], instances?: number[]) {
      const created = await liveApi().data<{ id: string; token: string }>('POST', '/agents', { name });
      const proc = spawnAgent(created.token, extraEnv, args, instances);
      await waitForAgent(created.id, 'online');
      return { id: created.id, token: created.token, proc };
    },
    async stop() {
      await Promise.all(agents.map((a) => stopProc(a)));
      await Promise.all(servers.map((s) => stopProc(s)));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
