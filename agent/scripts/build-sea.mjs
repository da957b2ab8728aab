#!/usr/bin/env node
/**
 * Builds the single-file agent: a Node.js single executable application (SEA) of xfer-agent,
 * for servers where no Node.js is installed (docs/agent.md, "Single-file binary").
 *
 *   npm run build:sea -w agent            → agent/dist-sea/xfer-agent
 *
 * Steps: esbuild bundles agent/dist/bin/xfer-agent.js (the tsc output: run `tsc -b` first; the
 * npm script does) with everything it imports into one CommonJS script, the only main script a
 * SEA on Node 22/24 runs; the Node binary running this script writes the preparation blob
 * (`--experimental-sea-config`); a copy of that same binary, stripped of its symbol table and
 * debug sections when `strip` is on the PATH (the dynamic symbols native addons link against
 * stay), gets the blob injected with postject. The blob and the binary must come from the same
 * Node release, so the agent binary is built from `process.execPath`, which must be Node ≥ 22 and
 * carry the SEA fuse (the official nodejs.org builds do). The binary is for the architecture this
 * runs on, Linux only (macOS and Windows binaries need signing steps this does not do). ssh2's
 * native addons go into the blob as assets when that node loads them (EMBEDDED, below).
 *
 * Options: --out DIR (default agent/dist-sea).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const require = createRequire(import.meta.url);

const AGENT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** The fuse string Node's SEA support looks for; postject flips its last character on injection. */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
/**
 * Optional native modules the connectors' libraries try to load inside try/catch, each with a
 * JavaScript fallback. A SEA's `require` loads only Node's built-in modules, so left out of the
 * bundle they fail to load and the fallback runs: `bufferutil` (ws: frame masking) and
 * `utf-8-validate` (ws, unused on Node >= 18.14: `buffer.isUtf8`). ssh2's two (EMBEDDED, below)
 * are left out the same way when they cannot be embedded.
 */
const LEFT_OUT = ['bufferutil', 'utf-8-validate', '*.node'];

/**
 * Native addons embedded in the binary as SEA assets: ssh2's `sshcrypto.node` (its ciphers and
 * MACs; without it SFTP runs 3–5× slower on per-packet node:crypto calls) and `cpu-features`
 * (ssh2 orders chacha20-poly1305 by the CPU's AES support). Both are built by `npm ci` for the
 * Node that ran it; each is embedded only when the node building the binary (the one it copies)
 * loads it, else left out as above and the summary line says why. In the bundle, the `require`
 * of each (`module` → `request`, rewritten exactly or the build fails) becomes the run-time
 * loader of scripts/sea-native.cjs, which writes it to a private file and `process.dlopen`s it.
 */
const ssh2Dir = dirname(require.resolve('ssh2/package.json'));
const EMBEDDED = [
  {
    asset: 'sshcrypto.node',
    file: join(ssh2Dir, 'lib/protocol/crypto/build/Release/sshcrypto.node'),
    module: /[\\/]ssh2[\\/]lib[\\/]protocol[\\/]crypto\.js$/,
    request: "require('./crypto/build/Release/sshcrypto.node')",
    works: (exports) => typeof exports.AESGCMCipher === 'function' && typeof exports.ChaChaPolyCipher === 'function',
  },
  {
    asset: 'cpufeatures.node',
    file: optionalFile(() => join(dirname(createRequire(join(ssh2Dir, 'package.json')).resolve('cpu-features/package.json')), 'build/Release/cpufeatures.node')),
    module: /[\\/]cpu-features[\\/]lib[\\/]index\.js$/,
    request: "require('../build/Release/cpufeatures.node')",
    works: (exports) => typeof exports.getCPUInfo === 'function',
    // ssh2 requires the package itself: bundled only when its addon is embedded.
    package: 'cpu-features',
  },
];
/** The run-time loader the rewritten requires call. */
const ADDON_LOADER = join(dirname(fileURLToPath(import.meta.url)), 'sea-native.cjs');

/** `find()`'s path, or null when it throws (an optional dependency not installed). */
function optionalFile(find) {
  try {
    return find();
  } catch {
    return null;
  }
}

/**
 * postject, quiet about the note sections of Node's ELF binary: its ELF library prints "Can't find
 * string offset for section name '.note…'" through console.warn while it writes them back, which
 * is harmless (nodejs/postject#83; the binary runs). It binds console.warn when loaded.
 */
function loadPostject() {
  const warn = console.warn;
  console.warn = (...args) => {
    if (!/^warning: Can't find string offset for section name '\.note/.test(String(args[0]))) warn(...args);
  };
  return require('postject');
}

function fail(message) {
  process.stderr.write(`build-sea: ${message}\n`);
  process.exit(1);
}

const { values: opts } = parseArgs({ options: { out: { type: 'string', default: join(AGENT, 'dist-sea') } } });
const outDir = resolve(opts.out);
const major = Number(process.versions.node.split('.')[0]);
if (process.platform !== 'linux') fail(`only Linux binaries are built here, not ${process.platform} (docs/agent.md, "Single-file binary")`);
if (major < 22) {
  fail(`a single executable needs Node.js >= 22 to build and run it, and this is ${process.version} (${process.execPath}).\n`
    + `Run the build with a newer node first on the PATH, e.g. PATH="$(scripts/node-runtime.sh 24):$PATH" npm run build:sea -w agent`);
}
const base = process.execPath;
if (!readFileSync(base).includes(`${SEA_FUSE}:0`)) {
  fail(`${base} has no unused SEA fuse (${SEA_FUSE}): build with an official nodejs.org release of Node.js, not a single executable or a build without SEA support`);
}
const entry = join(AGENT, 'dist/bin/xfer-agent.js');
if (!statSync(entry, { throwIfNoEntry: false })) fail(`${entry} is missing: run \`npx tsc -b\` first (the npm script build:sea does)`);
const { AGENT_V8_FLAGS } = await import(join(AGENT, 'dist/runtime.js'));

/**
 * Whether this node loads `addon`'s file, the test of embedding it: the binary is a copy of this
 * node, and an addon built for another Node (another NODE_MODULE_VERSION) fails the same way here.
 * Returns null when it loads, else why not.
 */
function unusable(addon) {
  if (!addon.file || !statSync(addon.file, { throwIfNoEntry: false })) return 'not built (npm ci skipped its install script?)';
  const loaded = { exports: {} };
  try {
    process.dlopen(loaded, addon.file);
  } catch (err) {
    // node-gyp's config beside build/Release names the ABI it compiled for: the usual cause.
    const built = optionalFile(() => /"node_module_version": (\d+)/.exec(readFileSync(join(dirname(addon.file), '../config.gypi'), 'utf8'))?.[1]);
    if (built && built !== process.versions.modules) {
      return `built for NODE_MODULE_VERSION ${built} (npm ci ran on another Node major), and ${process.version} has ${process.versions.modules}`;
    }
    return `${process.version} cannot load it: ${String(err.message).replace(/\s+/g, ' ')}`;
  }
  return addon.works(loaded.exports) ? null : 'it loads but lacks the exports the library uses';
}
const embedded = [];
const leftOut = [];
for (const addon of EMBEDDED) {
  const why = unusable(addon);
  if (why) leftOut.push(`${addon.asset} left out: ${why}`);
  else embedded.push(addon);
}

const started = Date.now();
mkdirSync(outDir, { recursive: true });
const bundle = join(outDir, 'xfer-agent.cjs');
const blob = join(outDir, 'xfer-agent.blob');
const binary = join(outDir, 'xfer-agent');
// A binary left from an earlier build: copyFileSync would write through a running one.
rmSync(binary, { force: true });
const { version } = JSON.parse(readFileSync(join(AGENT, 'package.json'), 'utf8'));

/**
 * `import.meta` is empty in a CommonJS bundle, so a module that finds itself through
 * `import.meta.url` would break in the binary: esbuild's warning about it is an error here
 * (below), and the known uses are rewritten, each checked to be loaded:
 * - the agent's version.ts reads ../package.json beside the module: in the binary the version is
 *   a constant;
 * - @azure/storage-common's crc64.js (blob and fileshare connectors) builds a `require` from
 *   `import.meta.url` to reach node:fs and node:path for Emscripten; its WebAssembly is inline
 *   (base64) and no file beside it is read, so the executable's own URL does.
 */
const VERSION_MODULE = join(AGENT, 'dist/version.js');
const CRC64_MODULE = /[\\/]@azure[\\/]storage-common[\\/]dist[\\/]esm[\\/]crc64\.js$/;
const rewritten = new Set();
const importMetaUses = {
  name: 'xfer-agent-import-meta',
  setup(b) {
    b.onLoad({ filter: /[\\/](version|crc64)\.js$/ }, (args) => {
      if (args.path === VERSION_MODULE) {
        rewritten.add('version');
        return { contents: `export const AGENT_VERSION = ${JSON.stringify(version)};\n`, loader: 'js' };
      }
      if (CRC64_MODULE.test(args.path)) {
        rewritten.add('crc64');
        const source = readFileSync(args.path, 'utf8');
        // The module declares its own `require` and `__filename`: the URL comes from node:url and
        // process.execPath under names of ours.
        const contents = 'import { pathToFileURL as xferPathToFileURL } from "node:url";\n'
          + source.replaceAll('import.meta.url', 'xferPathToFileURL(process.execPath).href');
        return { contents, loader: 'js' };
      }
      return undefined;
    });
  },
};

const nativeAddons = {
  name: 'xfer-agent-native-addons',
  setup(b) {
    for (const addon of embedded) {
      b.onLoad({ filter: addon.module }, (args) => {
        const source = readFileSync(args.path, 'utf8');
        if (!source.includes(addon.request)) fail(`${args.path} no longer has \`${addon.request}\`: update EMBEDDED in ${fileURLToPath(import.meta.url)}`);
        rewritten.add(addon.asset);
        const load = `require(${JSON.stringify(ADDON_LOADER)}).loadEmbeddedAddon(${JSON.stringify(addon.asset)})`;
        return { contents: source.replace(addon.request, load), loader: 'js' };
      });
    }
  },
};

const result = await build({
  entryPoints: [entry],
  outfile: bundle,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: `node${major}`,
  external: [...LEFT_OUT, ...EMBEDDED.filter((a) => a.package && !embedded.includes(a)).map((a) => a.package)],
  plugins: [importMetaUses, nativeAddons],
  logOverride: { 'empty-import-meta': 'error' },
  // Licence comments of the bundled packages stay in the bundle (and so in the binary).
  legalComments: 'eof',
  metafile: true,
  logLevel: 'warning',
});
for (const name of ['version', 'crc64', ...embedded.map((a) => a.asset)]) {
  if (!rewritten.has(name)) fail(`the bundle never loaded the ${name} module the build rewrites: update importMetaUses or EMBEDDED in ${fileURLToPath(import.meta.url)}`);
}
const packages = new Set(Object.keys(result.metafile.inputs)
  .map((p) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(p)?.[1])
  .filter(Boolean));

writeFileSync(join(outDir, 'sea-config.json'), JSON.stringify({
  main: bundle,
  output: blob,
  disableExperimentalSEAWarning: true,
  // V8's compiled code of the bundle, made by the same node: `--version` starts in about 0.3 s
  // instead of 0.5–0.6 s. (Its caveat, no `import()`, spares built-in modules: the bundle has
  // two, in AWS SDK paths for EC2 and Lambda.) A startup snapshot would need the agent written
  // for `v8.startupSnapshot`; not used.
  useSnapshot: false,
  useCodeCache: true,
  // The V8 heap flags `xfer-agent start` relaunches node with (src/runtime.ts): a SEA cannot be
  // relaunched with node's options, so it starts with them (a node whose SEA config has no
  // `execArgv` yet ignores the field: the binary then runs with V8's defaults).
  execArgv: [...AGENT_V8_FLAGS],
  assets: Object.fromEntries(embedded.map((a) => [a.asset, a.file])),
}, null, 2));
// The code cache is made under the flags the binary runs with: V8 rejects a cache made under other
// flags ("Code cache data rejected" on every start, and no cache).
const prep = spawnSync(base, [...AGENT_V8_FLAGS, '--experimental-sea-config', join(outDir, 'sea-config.json')], { encoding: 'utf8' });
if (prep.status !== 0) fail(`writing the SEA blob failed (${prep.status}): ${prep.stderr}`);

copyFileSync(base, binary);
chmodSync(binary, 0o755);
let stripped = false;
try {
  execFileSync('strip', [binary], { stdio: 'ignore' });
  stripped = true;
} catch {
  // No binutils: the binary keeps Node's symbol table and debug sections (about 18 MB more); it works the same.
}
await loadPostject().inject(binary, 'NODE_SEA_BLOB', readFileSync(blob), { sentinelFuse: SEA_FUSE });
rmSync(blob);

const mb = (path) => (statSync(path).size / 1e6).toFixed(1);
const native = [
  embedded.length ? `${embedded.map((a) => a.asset).join(', ')} embedded` : '',
  ...leftOut,
  embedded.some((a) => a.asset === 'sshcrypto.node') ? '' : 'SFTP uses the slower JavaScript crypto',
].filter(Boolean).join('; ');
process.stdout.write(`build-sea: ${binary} (${mb(binary)} MB${stripped ? ', symbols stripped' : ''}; Node ${process.version} ${process.platform}-${process.arch};`
  + ` bundle ${mb(bundle)} MB of ${packages.size} packages; ${native}) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
