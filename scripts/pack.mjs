#!/usr/bin/env node
// `npm run pack`: installable tarballs of the workspace packages in dist-packages/ (or --out DIR),
// each self-contained as far as xfer goes: `npm i -g ./dist-packages/xfer-agent-0.1.0.tgz`.
//
// Why not plain `npm pack -w agent`: the agent, the CLI and the control plane depend on the internal
// libraries @xfer/shared and @xfer/storage, which are workspaces, not published anywhere. A tarball
// naming them as ordinary dependencies makes `npm i -g` fetch "@xfer/shared" from the public
// registry: a failed install at best, someone else's code at worst (dependency confusion). npm
// (checked with 11.19) ignores `bundleDependencies` for workspace dependencies, because they are
// hoisted symlinks in the root node_modules, not in the package's own. So this script stages each
// package: it takes npm's own `npm pack` of the workspace (its `files` list, the CLI's prepack
// manifest), puts the packed internal libraries it needs under the staged node_modules, lists them
// in `bundleDependencies`, moves their third-party dependencies into the staged package's own
// `dependencies` (npm would not install a bundled package's dependencies: see below), takes the
// root's `engines`, drops `devDependencies` and `scripts`, and packs that. Only third-party
// packages then come from the registry (or the npm cache).
//
// Build first (`npm run pack` runs `tsc -b`). `private: true` stays: it refuses `npm publish`, not
// `npm pack`, and these packages are distributed as tarballs, not through a registry.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** The packages made into tarballs: workspace directory names, libraries first. */
const PACKAGES = ['shared', 'storage', 'cli', 'agent', 'control-plane'];

const { values } = parseArgs({ options: { out: { type: 'string', default: join(root, 'dist-packages') } } });
const outDir = resolve(values.out);
const say = (msg) => process.stderr.write(`pack: ${msg}\n`);
const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));
const npm = (args, cwd) => execFileSync('npm', args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });

const rootManifest = readJson(join(root, 'package.json'));
const manifests = new Map(PACKAGES.map((dir) => [dir, readJson(join(root, dir, 'package.json'))]));
const dirOfName = new Map([...manifests].map(([dir, pkg]) => [pkg.name, dir]));
for (const dir of PACKAGES) {
  if (!existsSync(join(root, dir, 'dist'))) throw new Error(`${dir}/dist is missing: build first (npx tsc -b)`);
}

/** The internal packages `dir` needs, directly or through another internal package. */
function internalClosure(dir, seen = new Set()) {
  for (const name of Object.keys(manifests.get(dir).dependencies ?? {})) {
    const dep = dirOfName.get(name);
    if (dep && !seen.has(name)) {
      seen.add(name);
      internalClosure(dep, seen);
    }
  }
  return seen;
}

/** `npm pack` of one workspace into a directory of its own; the tarball's path. */
function packWorkspace(dir, into) {
  const dest = join(into, dir);
  mkdirSync(dest, { recursive: true });
  npm(['pack', '--workspace', dir, '--pack-destination', dest, '--loglevel=warn'], root);
  const [tgz] = readdirSync(dest).filter((f) => f.endsWith('.tgz'));
  if (!tgz) throw new Error(`npm pack -w ${dir} wrote no tarball`);
  return join(dest, tgz);
}

const untar = (tgz, dest) => {
  mkdirSync(dest, { recursive: true });
  execFileSync('tar', ['-xzf', tgz, '-C', dest, '--strip-components=1']);
};

/**
 * The staged manifest: internal dependencies bundled, their third-party dependencies merged in.
 * Two packages asking for one dependency with different ranges is an error to fix in the sources
 * (one range for one library), not something to choose here silently.
 */
function stagedManifest(dir, bundled) {
  const pkg = structuredClone(manifests.get(dir));
  const deps = { ...pkg.dependencies };
  const origin = Object.fromEntries(Object.keys(deps).map((name) => [name, pkg.name]));
  for (const name of bundled) {
    for (const [dep, range] of Object.entries(manifests.get(dirOfName.get(name)).dependencies ?? {})) {
      if (dirOfName.has(dep)) continue;
      if (deps[dep] !== undefined && deps[dep] !== range) {
        throw new Error(`${origin[dep]} wants ${dep}@${deps[dep]} but ${name} wants ${dep}@${range}: use one range in both package.json files`);
      }
      deps[dep] = range;
      origin[dep] ??= name;
    }
  }
  // Every bundled package is listed in dependencies too (npm installs bundleDependencies only so),
  // at the version packed, the ones needed only through another internal package included.
  for (const name of bundled) deps[name] = manifests.get(dirOfName.get(name)).version;
  pkg.dependencies = Object.fromEntries(Object.entries(deps).sort(([a], [b]) => a.localeCompare(b)));
  if (bundled.length > 0) pkg.bundleDependencies = [...bundled].sort();
  // The Node.js versions the repository supports (root package.json), so npm warns on another.
  pkg.engines ??= rootManifest.engines;
  delete pkg.devDependencies;
  delete pkg.scripts;
  return pkg;
}

const work = mkdtempSync(join(tmpdir(), 'xfer-pack-'));
try {
  const packed = new Map(PACKAGES.map((dir) => [dir, packWorkspace(dir, join(work, 'npm'))]));
  mkdirSync(outDir, { recursive: true });
  for (const dir of PACKAGES) {
    const bundled = [...internalClosure(dir)];
    const stage = join(work, 'stage', dir);
    untar(packed.get(dir), stage);
    for (const name of bundled) {
      const libDir = join(stage, 'node_modules', ...name.split('/'));
      untar(packed.get(dirOfName.get(name)), libDir);
      // The bundled library's manifest keeps only its internal dependencies (bundled beside it):
      // npm counts a bundled package's dependencies as part of the bundle and so never fetches
      // them, leaving an empty directory. Its third-party ones are the staged package's (above),
      // installed one level up, where Node's resolution from the library finds them.
      const lib = readJson(join(libDir, 'package.json'));
      lib.dependencies = Object.fromEntries(Object.entries(lib.dependencies ?? {}).filter(([dep]) => dirOfName.has(dep)));
      delete lib.devDependencies;
      delete lib.scripts;
      writeFileSync(join(libDir, 'package.json'), `${JSON.stringify(lib, null, 2)}\n`);
    }
    writeFileSync(join(stage, 'package.json'), `${JSON.stringify(stagedManifest(dir, bundled), null, 2)}\n`);
    // Packed outside the repository, so npm sees a lone package (no workspace root above it).
    const dest = join(work, 'out', dir);
    mkdirSync(dest, { recursive: true });
    npm(['pack', '--ignore-scripts', '--pack-destination', dest, '--loglevel=warn'], stage);
    const [tgz] = readdirSync(dest);
    cpSync(join(dest, tgz), join(outDir, tgz));
    say(`${join(outDir, tgz)}${bundled.length ? ` (bundles ${bundled.join(', ')})` : ''}`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
