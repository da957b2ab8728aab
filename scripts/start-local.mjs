#!/usr/bin/env node
// `npm start`: the local stack. Starts `xfer-server start --local` (embedded database, control
// plane, admin key on first start), then one `xfer-agent` with the token the server keeps in
// its data dir, so a newcomer can copy files at once. Ctrl-C stops the agent (draining its jobs),
// then the server. The agent's JSON logs go to <data dir>/agent.log.
import { spawn } from 'node:child_process';
import { openSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = resolve(process.env.XFER_DATA_DIR || join(root, '.xfer'));
const say = (msg) => process.stderr.write(`xfer: ${msg}\n`);

const server = spawn(process.execPath, [join(root, 'control-plane/dist/bin/xfer-server.js'), 'start', '--local'], {
  env: { ...process.env, XFER_DATA_DIR: dataDir },
  stdio: ['ignore', 'pipe', 'inherit'],
});
let agent = null;
let stopping = false;
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
  agent = spawn(process.execPath, [join(root, 'agent/dist/bin/xfer-agent.js'), 'start', '--url', url], {
    env: { ...process.env, XFER_AGENT_TOKEN: readFileSync(tokenFile, 'utf8').trim() },
    stdio: ['ignore', log, log],
  });
  say(`local agent started (pid ${agent.pid}, logs in ${logFile})`);
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
  process.exit(code ?? 1);
});
