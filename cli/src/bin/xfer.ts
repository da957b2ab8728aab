#!/usr/bin/env node
/**
 * xfer: the command-line interface. Its oclif commands land with the CLI issue; until then the
 * binary only answers --help and --version.
 */
const HELP = `xfer — the xfer command-line interface

Usage:
  xfer --help | --version

Commands for every endpoint (xfer <topic> <verb>) land with the CLI issue.`;

const [command] = process.argv.slice(2);
if (!command || command === '--help' || command === '-h') process.stdout.write(HELP + '\n');
else if (command === '--version') process.stdout.write('0.1.0\n');
else {
  process.stderr.write(`xfer: unknown command "${command}" (try --help)\n`);
  process.exit(2);
}
