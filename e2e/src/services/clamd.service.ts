import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findExecutable, startServerProcess, stopPid } from '@xfer/control-plane/process';
import { clamdConf, clamdPing } from '@xfer/control-plane/clamd';
import { eicar } from '../tools/eicar.js';
import type { ServiceContext, ServiceDefinition } from './types.js';

/**
 * Detection names of the test database, as clamd reports them (it appends `.UNOFFICIAL` to
 * signatures from outside the official databases). The body signature matches EICAR anywhere in a
 * stream and is the one clamd reports first, for the bare file as for EICAR inside a larger file;
 * the hash signature (MD5 of the whole file, from `sigtool --md5`) catches the bare file too.
 */
export const EICAR_SIGNATURE = 'Xfer.Test.EICAR.UNOFFICIAL';
export const EICAR_HASH_SIGNATURE = 'Xfer.Test.EICAR-File.UNOFFICIAL';

/**
 * ClamAV's clamd (Debian `clamav-daemon`) with the clamd.conf xfer uses (control-plane's
 * `clamdConf`: sizes raised to clamd's ceiling, AlertExceedsMax) and a signature database built
 * at start for the EICAR test file only (no signature download is possible here; production runs
 * freshclam). Listens on a free 127.0.0.1 port and on a unix socket in the data dir. Runs as the
 * caller (root in CI); clamd writes each stream to `<dataDir>/tmp` while scanning it.
 */
export const clamd: ServiceDefinition = {
  name: 'clamd',
  summary: 'ClamAV clamd (INSTREAM), test signatures for EICAR, TCP and unix socket',
  provides: ['XFER_TEST_CLAMD', 'XFER_TEST_CLAMD_SOCKET'],
  async install(ctx) {
    clamavBinaries(ctx);
  },
  async start(ctx) {
    const { clamd: bin, sigtool } = clamavBinaries(ctx);
    const d = ctx.dataDir;
    const db = join(d, 'db');
    const tmp = join(d, 'tmp');
    await mkdir(db);
    await mkdir(tmp);
    await writeTestDatabase(db, sigtool, ctx);
    const config = join(d, 'clamd.conf');
    const socket = join(d, 'clamd.sock');
    const { pid, port } = await startServerProcess({
      name: 'clamd',
      bin,
      args: () => ['--config-file', config],
      logPath: join(d, 'clamd.out'),
      env: ctx.env,
      timeoutMs: 30_000,
      beforeSpawn: (p) => writeFile(config, clamdConf({ databaseDir: db, localSocket: socket, tcpPort: p, temporaryDir: tmp, logFile: join(d, 'clamd.log'), bytecode: false }), { mode: 0o644 }),
    });
    // clamd binds TCP first and creates the unix socket a moment later.
    for (let i = 0; !(await clamdPing({ path: socket }, 1000)); i++) {
      if (i >= 100) {
        await stopPid(pid);
        throw new Error(`clamd did not answer PING on ${socket}; see ${join(d, 'clamd.log')}`);
      }
      await sleep(50);
    }
    return { pid, env: { XFER_TEST_CLAMD: `127.0.0.1:${port}`, XFER_TEST_CLAMD_SOCKET: socket } };
  },
  isHealthy: async (record) => {
    const [host, port] = (record.env.XFER_TEST_CLAMD ?? '').split(':');
    return clamdPing({ host: host!, port: Number(port) }, 2000);
  },
};

/**
 * Writes the EICAR signatures into `dir`: `xfer-test.hdb` (MD5 and size of the whole file, from
 * `sigtool --md5` reading it on stdin, so it never lands on disk) and `xfer-test.ndb` (its bytes
 * as a body signature, any file type, any offset).
 */
async function writeTestDatabase(dir: string, sigtool: string, ctx: ServiceContext): Promise<void> {
  const sample = eicar();
  const result = spawnSync(sigtool, ['--md5'], { input: sample, env: ctx.env as NodeJS.ProcessEnv, encoding: 'utf8' });
  const md5 = result.stdout?.trim() ?? '';
  if (result.status !== 0 || !/^[0-9a-f]{32}$/.test(md5)) throw new Error(`sigtool --md5 failed (exit ${result.status}): ${result.stderr}${md5}`);
  const hashName = EICAR_HASH_SIGNATURE.replace(/\.UNOFFICIAL$/, '');
  const bodyName = EICAR_SIGNATURE.replace(/\.UNOFFICIAL$/, '');
  await writeFile(join(dir, 'xfer-test.hdb'), `${md5}:${sample.length}:${hashName}\n`, { mode: 0o644 });
  await writeFile(join(dir, 'xfer-test.ndb'), `${bodyName}:0:*:${sample.toString('hex')}\n`, { mode: 0o644 });
}

/** Paths of clamd and sigtool; throws naming the Debian packages when one is missing. */
function clamavBinaries(ctx: ServiceContext): { clamd: string; sigtool: string } {
  const find = (name: string, dir: string) => findExecutable(name, ctx.env) ?? (existsSync(join(dir, name)) ? join(dir, name) : null);
  const clamdBin = find('clamd', '/usr/sbin');
  const sigtool = find('sigtool', '/usr/bin');
  if (!clamdBin || !sigtool) {
    const missing = [!clamdBin && 'clamd', !sigtool && 'sigtool'].filter(Boolean).join(' and ');
    throw new Error(`the clamd test server needs ${missing}: install the Debian packages clamav and clamav-daemon (apt-get install -y clamav clamav-daemon)`);
  }
  return { clamd: clamdBin, sigtool };
}
