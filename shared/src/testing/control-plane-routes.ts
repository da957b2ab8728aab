import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Every route of the control plane as `METHOD /path` (`GET /transfers/:id`), read from its route
 * files: the tests that hold the client and the CLI to "every endpoint" compare against it. The
 * source files, not a running server, so a route added anywhere is seen without wiring.
 * The agents' WebSocket (`GET /agents/connect`) is the agent's door, not an API call: left out.
 */
const ROUTES_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../../control-plane/src/routes');

export function controlPlaneRoutes(dir = ROUTES_DIR): string[] {
  const routes: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) routes.push(...controlPlaneRoutes(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
      for (const m of readFileSync(path, 'utf8').matchAll(/app\.(get|post|put|delete)(?:<[^(]*>)?\(\s*'([^']+)'/g)) {
        routes.push(`${m[1]!.toUpperCase()} ${m[2]}`);
      }
    }
  }
  return routes.filter((r) => r !== 'GET /agents/connect').sort();
}
