'use strict';
/**
 * Run-time half of the single-file agent's native addons (build-sea.mjs bundles this module and
 * points ssh2's and cpu-features' `require('…/*.node')` at `loadEmbeddedAddon`; docs/agent.md,
 * "Single-file binary"). A SEA's `require` loads only Node's built-in modules, so an addon
 * embedded as a SEA asset is written to a file and loaded with `process.dlopen`:
 *
 * - the file goes into a fresh directory of `mkdtemp` (mode 0700, a new random name each time),
 *   written with O_EXCL at 0600, so no other user can have put or swapped it (nothing is reused
 *   across starts, so there is nothing to verify by hash);
 * - it is removed, with its directory, as soon as `dlopen` returns: the mapping stays, and no
 *   file outlives the process even when it is killed;
 * - `$XDG_RUNTIME_DIR` (a per-user tmpfs) is tried first, then the temporary directory: a
 *   directory mounted noexec refuses the mapping, and the next one is tried.
 *
 * When no place works it throws: the libraries catch it and take their JavaScript fallback (the
 * agent's start line then says `ssh_crypto: "javascript"`), and one line on stderr says why,
 * naming only directories and the system's error.
 */
const { getRawAsset, isSea } = require('node:sea');
const { mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

/** Where an addon may be written, in order of preference. */
function places() {
  const runtime = process.env.XDG_RUNTIME_DIR;
  return [...new Set([runtime, tmpdir()].filter((dir) => typeof dir === 'string' && dir.startsWith('/')))];
}

/**
 * The exports of the addon embedded under asset `name` (e.g. `sshcrypto.node`).
 * @param {string} name
 * @returns {unknown}
 */
function loadEmbeddedAddon(name) {
  if (!isSea()) throw new Error(`${name}: not running as a single executable`);
  const bytes = new Uint8Array(getRawAsset(name));
  const failures = [];
  for (const place of places()) {
    let dir;
    try {
      dir = mkdtempSync(join(place, 'xfer-agent-'));
      const file = join(dir, name);
      writeFileSync(file, bytes, { mode: 0o600, flag: 'wx' });
      const addon = { exports: {} };
      process.dlopen(addon, file);
      return addon.exports;
    } catch (err) {
      failures.push(`${place}: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
    } finally {
      if (dir) rmSync(dir, { recursive: true, force: true });
    }
  }
  const reason = `the embedded ${name} did not load (${failures.join('; ') || 'no temporary directory'})`;
  process.stderr.write(`xfer-agent: ${reason}; using the JavaScript fallback\n`);
  throw new Error(reason);
}

module.exports = { loadEmbeddedAddon };
