import { execFileSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { controlPlaneRoutes } from './support/control-plane-routes.js';

/**
 * The CLI as oclif loads it from the build (`npm test` builds first): every control-plane route
 * has a command, and every command can be understood from its help. A command names the routes
 * it calls at the end of its summary, `… (GET /transfers/:id, POST /transfers/:id/cancel).`,
 * which is also what `xfer <command> --help` shows people. The routes come from the control
 * plane's OpenAPI document (support/control-plane-routes.ts): this test lives in e2e, the one
 * package that may import both the CLI and the control plane.
 */
const CLI_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../cli');
const ROUTE = /^(GET|POST|PUT|DELETE) \/\S*$/;

interface LoadedCommand {
  id: string;
  pluginName?: string;
  summary?: string;
  description?: string;
  examples?: Array<string | { command: string }>;
  flags: Record<string, unknown>;
}

/**
 * oclif's own view of the commands, loaded in a child process: oclif imports every command at
 * once, which jest's ESM loader cannot link ("request for 'node:os' is not in cache").
 */
function loadCommands(): LoadedCommand[] {
  const script = `const { Config } = await import('@oclif/core');
    const config = await Config.load(${JSON.stringify(CLI_ROOT)});
    process.stdout.write(JSON.stringify(config.commands.map(({ id, pluginName, summary, description, examples, flags }) => ({ id, pluginName, summary, description, examples, flags }))));`;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: CLI_ROOT, encoding: 'utf8' })) as LoadedCommand[];
}

let all: LoadedCommand[];
beforeAll(() => {
  all = loadCommands();
});

/** Our own commands (plugins such as autocomplete bring theirs). */
const commands = () => all.filter((c) => c.pluginName === '@xfer/cli');

/** The routes a summary declares; [] when it declares none. */
function declaredRoutes(summary: string | undefined): string[] {
  const m = /\(([^()]*)\)\.?$/.exec(summary ?? '');
  if (!m) return [];
  const parts = m[1]!.split(',').map((p) => p.trim());
  return parts.every((p) => ROUTE.test(p)) ? parts : [];
}

test('every route of the control plane has a command, and every declared route exists', async () => {
  const routes = await controlPlaneRoutes();
  expect(routes.length).toBeGreaterThan(50);
  const byRoute = new Map<string, string[]>();
  for (const c of commands()) {
    for (const r of declaredRoutes(c.summary)) byRoute.set(r, [...(byRoute.get(r) ?? []), c.id]);
  }
  const missing = routes.filter((r) => !byRoute.has(r));
  const unknown = [...byRoute.keys()].filter((r) => !routes.includes(r));
  expect({ missing, unknown }).toEqual({ missing: [], unknown: [] });
});

test('every command has a summary, a description and at least one example naming it', () => {
  const lacking = commands().flatMap((c) => {
    const examples = (c.examples ?? []).map((e) => (typeof e === 'string' ? e : e.command));
    const problems = [
      !c.summary && 'summary',
      !c.description && 'description',
      !examples.some((e) => e.includes(`<%= config.bin %> ${c.id.replaceAll(':', ' ')}`)) && 'an example of itself',
    ].filter(Boolean);
    return problems.length ? [`${c.id}: no ${problems.join(', ')}`] : [];
  });
  expect(lacking).toEqual([]);
  expect(commands().length).toBeGreaterThan(10);
});

test('every command takes the global flags, and --json', () => {
  for (const c of commands()) {
    expect({ id: c.id, flags: ['json', 'profile', 'url'].filter((f) => !(f in c.flags)) }).toEqual({ id: c.id, flags: [] });
  }
});

test('shell completion: the autocomplete plugin is loaded', () => {
  expect(all.map((c) => c.id)).toContain('autocomplete');
});
