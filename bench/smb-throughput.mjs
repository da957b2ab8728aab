#!/usr/bin/env node
// SMB throughput: the smb connector against smbclient, on the same Samba smbd in one run.
//
//   npm run build && node bench/smb-throughput.mjs [--mib 200] [--runs 3] [--depth 4]
//
// Writes a random file of --mib MiB to the share and reads it back, through the connector
// (agent/dist, signed SMB 3.0.2) and through `smbclient put`/`get` (Samba's own client, once as
// it defaults and once with --client-protection=sign), and prints the best MiB/s of --runs each
// way and this process's peak RSS. Figures, not asserts; the SHA-256 of every copy is checked.
import { spawnSync } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import { createReadStream, createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { ensureServices, releaseServices } from '../e2e/dist/services/index.js';
import { SmbConnector } from '../agent/dist/connectors/smb/smb.connector.js';

const { values: args } = parseArgs({ options: { mib: { type: 'string', default: '200' }, runs: { type: 'string', default: '3' }, depth: { type: 'string', default: '4' } } });
const BYTES = Number(args.mib) * 1024 * 1024;
const RUNS = Number(args.runs);
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);
const { env } = await ensureServices(['smb'], { env: process.env, log });
const s = { host: env.XFER_TEST_SMB_HOST, port: Number(env.XFER_TEST_SMB_PORT), user: env.XFER_TEST_SMB_USER, password: env.XFER_TEST_SMB_PASSWORD, share: env.XFER_TEST_SMB_SHARE, root: env.XFER_TEST_SMB_ROOT };

const work = mkdtempSync(join(tmpdir(), 'xfer-bench-smb-'));
try {
  const source = join(work, 'source.bin');
  const out = createWriteStream(source);
  const block = Buffer.alloc(4 * 1024 * 1024);
  for (let done = 0; done < BYTES; done += block.length) {
    randomFillSync(block);
    out.write(block.subarray(0, Math.min(block.length, BYTES - done)));
  }
  await new Promise((ok) => out.end(ok));
  const want = await sha256(source);
  // Credentials for smbclient through a 0600 file, out of the process list.
  const auth = join(work, 'auth');
  writeFileSync(auth, `username = ${s.user}\npassword = ${s.password}\n`, { mode: 0o600 });

  const connector = new SmbConnector({ id: 'bench', name: 'bench', type: 'smb', host: s.host, port: s.port, path: `/${s.share}`, options: {}, agent_id: null, credentials: { username: s.user, password: s.password } }, { readDepth: Number(args.depth), writeDepth: Number(args.depth) });
  log(await connector.test());
  const results = {};
  const best = (name, seconds) => (results[name] = Math.max(results[name] ?? 0, BYTES / 1048576 / seconds));
  for (let run = 1; run <= RUNS; run++) {
    let t = performance.now();
    await connector.write('bench-connector.bin', createReadStream(source, { highWaterMark: 1024 * 1024 }), { size: BYTES });
    best('connector write', (performance.now() - t) / 1000);
    await check(join(s.root, 'bench-connector.bin'), want);
    t = performance.now();
    const back = join(work, 'back.bin');
    await pipeline(await connector.read('bench-connector.bin'), createWriteStream(back));
    best('connector read', (performance.now() - t) / 1000);
    await check(back, want);
    rmSync(back);

    for (const [label, extra] of [['smbclient', []], ['smbclient signed', ['--client-protection=sign']]]) {
      const smbclient = (command) => {
        const t0 = performance.now();
        const r = spawnSync('smbclient', [`//${s.host}/${s.share}`, '-p', String(s.port), '-A', auth, ...extra, '-E', '-c', command], { encoding: 'utf8' });
        if (r.status !== 0) throw new Error(`smbclient ${command}: ${r.stderr}`);
        return (performance.now() - t0) / 1000;
      };
      best(`${label} put`, smbclient(`put ${source} bench-smbclient.bin`));
      await check(join(s.root, 'bench-smbclient.bin'), want);
      const back = join(work, 'back.bin');
      best(`${label} get`, smbclient(`get bench-smbclient.bin ${back}`));
      await check(back, want);
      rmSync(back);
    }
  }
  await connector.remove('bench-connector.bin');
  await connector.remove('bench-smbclient.bin');
  await connector.close();
  for (const [name, mibs] of Object.entries(results)) console.log(`${name.padEnd(24)} ${mibs.toFixed(0).padStart(5)} MiB/s`);
  console.log(`${Args()} peak RSS of this process: ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB`);
} finally {
  rmSync(work, { recursive: true, force: true });
  await releaseServices(['smb'], { env: process.env, log });
}

function Args() {
  return `${args.mib} MiB file, best of ${RUNS};`;
}

async function sha256(file) {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk);
  return hash.digest('hex');
}

async function check(file, want) {
  if ((await sha256(file)) !== want) throw new Error(`${file}: SHA-256 differs from the source`);
}
