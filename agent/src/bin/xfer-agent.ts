#!/usr/bin/env node
/**
 * xfer-agent: the daemon near the data. Its session with the control plane, job runner and
 * connectors land with the agents issue; until then the binary only answers --help and --version.
 */
const HELP = `xfer-agent — runs transfer jobs near the data (dials out to the control plane)

Usage:
  xfer-agent --help | --version

The agent daemon (xfer-agent start --url URL --token agt_…) lands with the agents issue.`;

const [command] = process.argv.slice(2);
if (!command || command === '--help' || command === '-h') process.stdout.write(HELP + '\n');
else if (command === '--version') process.stdout.write('0.1.0\n');
else {
  process.stderr.write(`xfer-agent: unknown command "${command}" (try --help)\n`);
  process.exit(2);
}
