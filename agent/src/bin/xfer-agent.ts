#!/usr/bin/env node
/**
 * xfer-agent's launcher. `start` (the daemon) first makes sure node runs with the agent's V8 heap
 * flags (runtime.ts `AGENT_V8_FLAGS`: they size the heap, so they cannot be set from inside a
 * running process), replacing this process with node started with them; only then is the agent
 * loaded, so the relaunch costs a node start, not a second load of the agent. The composition
 * root is main.ts.
 */
import { AGENT_V8_FLAGS, relaunchWith } from '../runtime.js';

if (process.argv[2] === 'start') relaunchWith(AGENT_V8_FLAGS);
void import('./main.js');
