import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type IViolation } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

/**
 * The import rules of the repository (.dependency-cruiser.cjs; docs/architecture.md "Import
 * rules"), read from the import graph of every package's sources and tests: the control plane's
 * layers (routes -> plugins -> lib/models), shared at the bottom, storage on shared only, no
 * package on e2e, the agent and the CLI never on the control plane, no cycles in the control
 * plane. Each violating import fails the test by name: `rule: from -> to`.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Sources and tests of every package; a package imported by name is seen at its built entry (dist/), not followed further. */
const TREES = ['shared/src', 'storage/src', 'control-plane/src', 'control-plane/test', 'agent/src', 'agent/test', 'cli/src', 'e2e/src', 'e2e/test'];

/** `rule: from -> to`, and the whole loop for a cycle. */
const describe = (v: IViolation): string =>
  `${v.rule.name}: ${v.from} -> ${v.to}${v.cycle?.length ? ` (cycle: ${[v.from, ...v.cycle.map((c) => c.name)].join(' -> ')})` : ''}`;

test('every import follows the rules of .dependency-cruiser.cjs', async () => {
  // Paths are relative to baseDir: the rules name them from the root.
  const options = { ...(await extractDepcruiseOptions(join(ROOT, '.dependency-cruiser.cjs'))), baseDir: ROOT };
  const tsConfig = extractTSConfig(join(ROOT, 'tsconfig.base.json'));
  const { output } = await cruise(TREES, options, undefined, { tsConfig });
  if (typeof output === 'string') throw new Error('dependency-cruiser answered a report, not a result');
  // Every tree is read (a misspelt one would make the rules vacuous), and every import resolves.
  expect(output.summary.totalCruised).toBeGreaterThan(400);
  const unresolved = output.modules.flatMap((m) => m.dependencies.filter((d) => d.couldNotResolve).map((d) => `${m.source} -> ${d.module}`));
  expect(unresolved).toEqual([]);
  expect(output.summary.violations.map(describe).sort()).toEqual([]);
});
