// Writes oclif.manifest.json (every command's id, flags, args and help) for a packed CLI: with it,
// oclif imports only the command that runs instead of all of them (0.4 s → 0.2 s per call).
// Run at `npm pack` time only (prepack): in the working tree a manifest would go stale as soon as
// a command changes, so development runs without one.
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Config } from '@oclif/core';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const config = await Config.load(root);
const plugin = config.plugins.get(config.pjson.name);
writeFileSync(join(root, 'oclif.manifest.json'), JSON.stringify(plugin.manifest));
console.log(`oclif.manifest.json: ${Object.keys(plugin.manifest.commands).length} commands`);
