import { readFileSync } from 'node:fs';

/**
 * The agent's version, from its package.json (one directory above both src/ and dist/). The
 * single-file build (agent/scripts/build-sea.mjs) replaces this module with the version as a
 * constant: a single executable has no package.json beside its modules.
 */
export const AGENT_VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
