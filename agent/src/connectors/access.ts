import { realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { NetworkGuard, type NetworkRules, type Resolver } from './network-guard.js';
import { ConnectorError } from './types.js';

/**
 * What the agent's owner lets its connectors touch (docs/agent.md "What the agent may touch"):
 * local directories (`allow_roots`, none by default) and hosts (`allow_hosts` / `deny_hosts`,
 * see network-guard.ts). Built once from the agent's configuration and handed to every connector
 * through ConnectorContext; a connector made without one gets `closedAccess()`: no local
 * directory, and the default host rules.
 */
export interface AccessRules extends NetworkRules {
  /** Absolute directories of the agent's host that connections may use (nfs `mount_path`, …). */
  allowRoots: readonly string[];
}

export const ROOTS_HINT = 'allow a directory with --allow-roots, XFER_AGENT_ALLOW_ROOTS or "allow_roots" in the agent\'s config file';

export class AgentAccess {
  readonly network: NetworkGuard;
  readonly roots: readonly string[];

  /** Throws Error naming a malformed entry (config.ts checks the same rules earlier). */
  constructor(rules: AccessRules, resolver?: Resolver) {
    this.network = new NetworkGuard(rules, resolver);
    this.roots = rules.allowRoots.map((root) => {
      if (!isAbsolute(root)) throw new Error(`allow_roots: "${root}" is not an absolute path`);
      return resolve(root);
    });
  }

  /**
   * Throws ConnectorError('PERMISSION') unless `dir` lies in an allowed root, by its path as
   * written (before any file system access).
   */
  checkRoot(dir: string): void {
    const path = resolve(dir);
    if (!this.roots.some((root) => within(path, root))) throw outside(dir, this.roots);
  }

  /**
   * Throws ConnectorError('PERMISSION') unless the real path `real` of a directory (symbolic
   * links resolved) lies in the real path of an allowed root: a link inside a root cannot lead
   * out of it. Roots that do not exist allow nothing.
   */
  async checkRealRoot(dir: string, real: string): Promise<void> {
    const roots = await Promise.all(this.roots.map((root) => realpath(root).catch(() => null)));
    if (!roots.some((root) => root !== null && within(real, root))) {
      throw outside(real === resolve(dir) ? dir : `${dir} (really ${real})`, this.roots);
    }
  }
}

function within(path: string, root: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

function outside(dir: string, roots: readonly string[]): ConnectorError {
  const allowed = roots.length === 0 ? 'the agent exposes no local directory (none is allowed by default)' : `the agent exposes only ${roots.join(', ')}`;
  return new ConnectorError('PERMISSION', `the agent may not use the local directory ${dir}: ${allowed}; ${ROOTS_HINT}`);
}

/** The access of an agent whose owner allowed nothing: no local directory, the default host rules. */
export function closedAccess(): AgentAccess {
  return new AgentAccess({ allowRoots: [], allowHosts: [], denyHosts: [] });
}
