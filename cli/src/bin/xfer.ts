#!/usr/bin/env node
/** xfer: the command-line interface. oclif finds the commands through the `oclif` section of package.json. */
import { flush, run } from '@oclif/core';
import { errorLine } from '../output.js';

try {
  await run(process.argv.slice(2), import.meta.url);
  await flush();
} catch (err) {
  // Commands report their own errors (BaseCommand.catch); what arrives here failed before one
  // ran, such as an unknown command: same one-line shape, usage exit code.
  const e = err as Error & { oclif?: { exit?: number } };
  const exit = e.oclif?.exit ?? 1;
  if (exit !== 0) {
    process.stderr.write(errorLine(String(e.message), process.argv.includes('--json')));
  }
  process.exitCode = exit;
}
