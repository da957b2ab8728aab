#!/usr/bin/env node
// `npm run services -- <command>`: the composition root of the test services, so the one place
// here that reads process.env.
import { relative } from 'node:path';
import { defaultCacheDir } from '@xfer/control-plane';
import { ensureSchemathesis } from '../tools/schemathesis.js';
import { ensureServices, findRepoRoot, installServices, SERVICES, serviceStatus, stopServices } from './index.js';

const USAGE = `Usage: npm run services -- <command>

  up [name...]       Start services (all when none named) and keep them until "down"
  down [name...]     Stop services (all recorded ones when none named)
  status             List recorded services and whether they answer
  install [name...]  Install or build what services need (CI runs this ahead of the tests);
                     without names, also the test tools (schemathesis)

Services: ${SERVICES.map((s) => `${s.name} (${s.summary})`).join(', ')}
Settings of running services are written as KEY='value' lines (shell-quoted) to .xfer/services.env.`;

async function main([command, ...names]: string[]): Promise<number> {
  const opts = { env: process.env };
  const all = SERVICES.map((s) => s.name);
  const envFile = relative(process.cwd(), `${findRepoRoot(process.cwd())}/.xfer/services.env`);
  switch (command) {
    case 'up': {
      const { env } = await ensureServices(names.length > 0 ? names : all, { ...opts, pin: true });
      for (const [key, value] of Object.entries(env)) process.stdout.write(`${key}=${value}\n`);
      process.stderr.write(`services: settings are in ${envFile}\n`);
      return 0;
    }
    case 'down': {
      const stopped = await stopServices(names, opts);
      process.stdout.write(stopped.length > 0 ? `stopped: ${stopped.join(', ')}\n` : 'nothing was running\n');
      return 0;
    }
    case 'status': {
      const statuses = await serviceStatus(opts);
      if (statuses.length === 0) process.stdout.write('no services recorded\n');
      for (const { name, record, healthy } of statuses) {
        const users = record.pinned ? 'pinned' : `users ${record.users.join(',') || '-'}`;
        const settings = Object.entries(record.env).map(([k, v]) => `${k}=${v}`).join(' ');
        process.stdout.write(`${name.padEnd(10)} ${(healthy ? 'up' : 'DOWN').padEnd(5)} pid ${record.pid}  ${users}  ${settings}\n`);
      }
      return statuses.every((s) => s.healthy) ? 0 : 1;
    }
    case 'install':
      await installServices(names.length > 0 ? names : all, opts);
      // Test tools that are not servers, with the whole install only: schemathesis (the API fuzz test).
      if (names.length === 0) {
        await ensureSchemathesis({ cacheDir: defaultCacheDir(opts.env), env: opts.env, log: (msg) => process.stderr.write(`services: ${msg}\n`) });
      }
      return 0;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE + '\n');
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`unknown command "${command}"\n\n${USAGE}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`services: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
