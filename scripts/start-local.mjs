#!/usr/bin/env node
// `npm start`: the local stack. Starts `xfer-server start --local` (embedded database, control
// plane, admin key on first start), then one `xfer-agent` with the token the server keeps in
// its data dir, so a newcomer can copy files at once. Ctrl-C stops the agent (draining its jobs),
// then the server. The agent's JSON logs go to <data dir>/agent.log.
// The local agent may expose one local directory only (--allow-roots): XFER_LOCAL_FILES, default
// ~/xfer-files, created if missing; never the data dir (master key, database) nor the repository,
// so a connection with options.mount_path "/" cannot read them (docs/agent.md).
// Uploads are scanned by clamd: unless XFER_CLAMD or XFER_SCANNER is set, or the system's clamd
// already answers on its Debian socket, a local clamd is started with its config, socket and log
// in <data dir>/clamd/ and the signatures freshclam keeps in /var/lib/clamav; it stops with us.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_CLAMD } from '@xfer/control-plane';
import { clamdConf, clamdPing } from '@xfer/control-plane/clamd';
import { findExecutable } from '@xfer/control-plane/process';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = resolve(process.env.XFER_DATA_DIR || join(root, '.xfer'));
const say = (msg) => process.stderr.write(`xfer: ${msg}\n`);

/** The one directory the local agent exposes; refused when it overlaps the data dir or the repository. */
const filesDir = resolve(process.env.XFER_LOCAL_FILES || join(homedir(), 'xfer-files'));
const within = (path, dir) => {
  const rel = relative(dir, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
};
for (const [dir, what] of [[dataDir, 'the data directory (master key, database)'], [root, 'the repository']]) {
  if (within(filesDir, dir) || within(dir, filesDir)) {
    say(`XFER_LOCAL_FILES=${filesDir} overlaps ${what} ${dir}: the local agent would expose it. Choose a folder outside both (default ~/xfer-files).`);
    process.exit(2);
  }
}
mkdirSync(filesDir, { recursive: true, mode: 0o700 });

/** Where freshclam keeps the signatures (Debian clamav-freshclam). */
const SIGNATURES_DIR = '/var/lib/clamav';
let clamd = null;
let stopping = false;

/** XFER_CLAMD for the server when we start clamd ourselves; undefined leaves the server's setting alone. */
async function startClamd() {
  if (process.env.XFER_CLAMD || process.env.XFER_SCANNER) return undefined;
  const bin = findExecutable('clamd') ?? (existsSync('/usr/sbin/clamd') ? '/usr/sbin/clamd' : null);
  if (!bin) {
    say(`clamd is not installed: uploads answer 503 unless a clamd answers on ${DEFAULT_CLAMD}. Install the Debian packages clamav clamav-daemon (then run freshclam), or set XFER_SCANNER=none for development (uploads are then NOT scanned).`);
    return undefined;
  }
  if (await clamdPing({ path: DEFAULT_CLAMD }, 1000)) {
    say(`using the system's clamd on ${DEFAULT_CLAMD}`);
    return undefined;
  }
  const dir = join(dataDir, 'clamd');
  const socket = join(dir, 'clamd.sock');
  const signatures = existsSync(SIGNATURES_DIR) ? readdirSync(SIGNATURES_DIR).filter((f) => /\.(c[lv]d|cud|hdb|hsb|mdb|msb|ndb|ldb|yara?)$/.test(f)) : [];
  if (signatures.length === 0) {
    // clamd refuses to start without signatures; the server still points at its socket, so uploads fail closed.
    say(`no malware signatures in ${SIGNATURES_DIR}: clamd is not started and uploads answer 503 until \`freshclam\` has run (then restart npm start).`);
    return socket;
  }
  mkdirSync(join(dir, 'tmp'), { recursive: true, mode: 0o700 });
  const config = join(dir, 'clamd.conf');
  writeFileSync(config, clamdConf({ databaseDir: SIGNATURES_DIR, localSocket: socket, temporaryDir: join(dir, 'tmp'), logFile: join(dir, 'clamd.log'), bytecode: true }), { mode: 0o600 });
  const out = openSync(join(dir, 'clamd.out'), 'a');
  // Same process group as ours: a terminal's Ctrl-C reaches it too.
  clamd = spawn(bin, ['--config-file', config], { stdio: ['ignore', out, out] });
  say(`clamd started (pid ${clamd.pid}, socket ${socket}, log ${join(dir, 'clamd.log')}); loading ${signatures.length} signature files can take a minute, uploads answer 503 until it is ready`);
  clamd.once('exit', (code, signal) => {
    if (!stopping) say(`clamd exited (${code ?? signal}); uploads answer 503. See ${join(dir, 'clamd.log')}.`);
  });
  (async () => {
    while (clamd.exitCode === null && clamd.signalCode === null && !stopping) {
      if (await clamdPing({ path: socket }, 1000)) return say('clamd is ready: uploads are scanned');
      await new Promise((r) => setTimeout(r, 1000));
    }
  })();
  return socket;
}

const clamdSocket = await startClamd();
const server = spawn(process.execPath, [join(root, 'control-plane/dist/bin/xfer-server.js'), 'start', '--local'], {
  env: { ...process.env, XFER_DATA_DIR: dataDir, ...(clamdSocket ? { XFER_CLAMD: clamdSocket } : {}) },
  stdio: ['ignore', 'pipe', 'inherit'],
});
let agent = null;
let out = '';

server.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  if (agent || stopping) return;
  out += chunk.toString();
  const url = /listening on (http:\/\/\S+\/api\/v1)/.exec(out)?.[1];
  const tokenFile = /Local agent token: (\S+)/.exec(out)?.[1];
  if (url && tokenFile) startAgent(url, tokenFile);
});

function startAgent(url, tokenFile) {
  const logFile = join(dataDir, 'agent.log');
  const log = openSync(logFile, 'a');
  agent = spawn(process.execPath, [join(root, 'agent/dist/bin/xfer-agent.js'), 'start', '--url', url, '--allow-roots', filesDir], {
    env: { ...process.env, XFER_AGENT_TOKEN: readFileSync(tokenFile, 'utf8').trim() },
    stdio: ['ignore', log, log],
  });
  say(`local agent started (pid ${agent.pid}, logs in ${logFile}); it may expose ${filesDir} only (nfs connections with options.mount_path inside it)`);
  agent.on('exit', (code, signal) => {
    if (!stopping) say(`local agent exited (${code ?? signal}); see ${logFile}. The control plane keeps running.`);
  });
}

function stop(signal) {
  if (stopping) return;
  stopping = true;
  const stopServer = () => server.kill('SIGTERM');
  if (agent && agent.exitCode === null && agent.signalCode === null) {
    agent.once('exit', stopServer);
    agent.kill(signal === 'SIGINT' ? 'SIGTERM' : signal);
  } else stopServer();
}
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
server.on('exit', (code) => {
  if (agent && agent.exitCode === null) agent.kill('SIGTERM');
  stopping = true;
  if (clamd && clamd.exitCode === null && clamd.signalCode === null) {
    clamd.once('exit', () => process.exit(code ?? 1));
    clamd.kill('SIGTERM');
  } else process.exit(code ?? 1);
});
