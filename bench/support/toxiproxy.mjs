// A network that is not loopback, for the benches: Toxiproxy (Shopify's maintained TCP fault
// proxy, a Go module) between the clients and the test servers, adding latency and a bandwidth
// cap (the kernel's netem is not available on the development machines). Built once with
// `go install` into the cache dir, like versitygw (e2e/src/services/s3.service.ts).
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { defaultCacheDir } from '@xfer/control-plane';

export const TOXIPROXY_VERSION = 'v2.5.0';
const PACKAGE = 'github.com/Shopify/toxiproxy/v2/cmd/server';

/** The cached toxiproxy server binary, built first (about a minute) when missing. */
export function ensureToxiproxy({ env = process.env, log = () => {} } = {}) {
  const bin = join(defaultCacheDir(env), 'bin');
  const target = join(bin, `toxiproxy-${TOXIPROXY_VERSION}`);
  try {
    accessSync(target, constants.X_OK);
    return target;
  } catch {
    // Not built yet.
  }
  const go = ['go', '/usr/local/go/bin/go'].find((g) => spawnSync(g, ['version']).status === 0);
  if (!go) throw new Error(`toxiproxy is not built (${target}) and Go is not on PATH to build it`);
  log(`building toxiproxy ${TOXIPROXY_VERSION} once into ${bin}`);
  mkdirSync(bin, { recursive: true });
  // GOBIN inside the cache dir: the finished binary is renamed in whole, never left half-built.
  const work = mkdtempSync(join(bin, '.toxiproxy-build-'));
  try {
    const r = spawnSync(go, ['install', '-trimpath', `${PACKAGE}@${TOXIPROXY_VERSION}`], { env: { ...env, GOBIN: work }, cwd: work, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`go install toxiproxy failed (${r.status}): ${(r.stderr || r.stdout || String(r.error)).slice(-3000)}`);
    renameSync(join(work, 'server'), target);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return target;
}

/** A free TCP port of 127.0.0.1 (toxiproxy's API takes a fixed port). */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer().once('error', reject).listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts toxiproxy on 127.0.0.1 (API on an ephemeral port). `wan.route(name, host, port)` makes a
 * proxy to host:port listening on an ephemeral port of 127.0.0.1, with `latencyMs` added each way
 * and, when `rateKBps` is set, each direction capped to it; it resolves with the proxy's
 * { host, port }. `stop()` ends the server (and so every proxy).
 */
export async function startWan({ latencyMs = 25, rateKBps = 0, env = process.env, log = () => {} } = {}) {
  const binary = ensureToxiproxy({ env, log });
  const apiPort = await freePort();
  const child = spawn(binary, ['-host', '127.0.0.1', '-port', String(apiPort)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-5000); });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const api = `http://127.0.0.1:${apiPort}`;
  const call = async (method, path, body) => {
    const res = await fetch(`${api}${path}`, { method, headers: { 'content-type': 'application/json' }, body: body && JSON.stringify(body) });
    const text = await res.text();
    if (!res.ok) throw new Error(`toxiproxy ${method} ${path}: ${res.status} ${text}`);
    return (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text;
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`toxiproxy exited (${child.exitCode}): ${stderr}`);
    try {
      await call('GET', '/version');
      break;
    } catch (err) {
      if (Date.now() > deadline) {
        child.kill();
        throw new Error(`toxiproxy did not answer on ${api}: ${err.message}; ${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  log(`toxiproxy ${TOXIPROXY_VERSION} on ${api}: ${latencyMs} ms each way${rateKBps ? `, ${rateKBps} KB/s each direction` : ''}`);
  const routes = new Map();
  return {
    latencyMs, rateKBps,
    async route(name, host, port) {
      const key = `${host}:${port}`;
      if (routes.has(key)) return routes.get(key);
      const proxy = await call('POST', '/proxies', { name, listen: '127.0.0.1:0', upstream: key, enabled: true });
      for (const stream of ['upstream', 'downstream']) {
        await call('POST', `/proxies/${name}/toxics`, { name: `latency-${stream}`, type: 'latency', stream, toxicity: 1, attributes: { latency: latencyMs, jitter: 0 } });
        if (rateKBps) await call('POST', `/proxies/${name}/toxics`, { name: `bandwidth-${stream}`, type: 'bandwidth', stream, toxicity: 1, attributes: { rate: rateKBps } });
      }
      const [lhost, lport] = proxy.listen.split(/:(?=\d+$)/);
      const routed = { host: lhost, port: Number(lport) };
      log(`wan: ${name} ${key} → ${proxy.listen}`);
      routes.set(key, routed);
      return routed;
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
