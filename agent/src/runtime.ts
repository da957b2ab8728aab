/**
 * How this process runs: as node with the agent's script, or as a single executable application
 * (SEA, agent/scripts/build-sea.mjs); and the V8 heap flags the daemon runs with. Node built-ins
 * only: bin/xfer-agent.ts imports it before the rest of the agent is loaded.
 */

/**
 * V8 flags of `xfer-agent start`, set before V8 sizes its heap (bin/xfer-agent.ts relaunches
 * node with them; a SEA gets them from its `execArgv`): they cannot be changed once it runs.
 *
 * `--max-semi-space-size=16` (MiB): V8 sizes the young generation from the heap limit, which
 * it derives from the machine's memory; with 16 GiB or more Node 24 lets it reach 2 × 64 MiB.
 * The agent keeps little alive (about 30 MB of JS while it compares a 10,000-file sync) but
 * allocates fast (a request, a listing page, a progress frame per file), so the young generation
 * grew to that maximum in seconds and stayed there: 128 MiB of the 290 MiB peak RSS measured
 * during `bench/sync-vs-rclone.mjs` (docs/agent.md "Measured"). 16 MiB holds what a scavenge
 * finds alive many times over; the cost is more scavenges, each as short.
 */
export const AGENT_V8_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

/** Whether this is a single executable application (its binary holds node and the agent). */
export function isSea(): boolean {
  const sea = process.getBuiltinModule?.('node:sea') as { isSea?: () => boolean } | undefined;
  if (sea?.isSea) return sea.isSea();
  // Node without node:sea or getBuiltinModule (before 20.16) cannot build one; argv[1] of a SEA
  // is the executable itself.
  return process.argv[1] === process.execPath;
}

/** The name of a V8/node flag without its value, dashes and underscores alike (`--max_semi_space_size=8` → `max-semi-space-size`). */
function flagName(arg: string): string {
  return arg.replace(/^--?/, '').split('=')[0]!.replaceAll('_', '-');
}

/**
 * The command line that runs this script again with `flags` before it (node's own options kept),
 * or null when there is nothing to do or no way to do it: each flag already given (on the
 * command line or in NODE_OPTIONS: the operator's choice stands), a SEA (its `execArgv` carries
 * them), or a node without `process.execve` (before 22.15; Windows).
 */
export function relaunchArgs(flags: readonly string[]): string[] | null {
  if (isSea() || typeof process.execve !== 'function') return null;
  const given = new Set([...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].filter((a) => a.startsWith('-')).map(flagName));
  const missing = flags.filter((f) => !given.has(flagName(f)));
  if (missing.length === 0) return null;
  return [process.execPath, ...missing, ...process.execArgv, process.argv[1]!, ...process.argv.slice(2)];
}

/**
 * Replaces this process (same pid, same environment and open descriptors) with node run with
 * `flags`; returns when it does not (see `relaunchArgs`, or the exec failed: the agent then runs
 * with V8's defaults, which work, only with a bigger heap).
 */
export function relaunchWith(flags: readonly string[]): void {
  const args = relaunchArgs(flags);
  if (!args) return;
  try {
    process.execve!(process.execPath, args, process.env);
  } catch (err) {
    process.stderr.write(`xfer-agent: could not restart node with ${flags.join(' ')} (${err instanceof Error ? err.message : String(err)}); running with V8's heap defaults\n`);
  }
}
