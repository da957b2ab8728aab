#!/usr/bin/env node
/**
 * Runs the Azure Files FAKE (azure-files.fake.ts) on 127.0.0.1:
 *   node main.js --root DIR --port PORT
 * with the account and key in XFER_FAKE_AZURE_FILES_ACCOUNT / XFER_FAKE_AZURE_FILES_KEY (the
 * environment, so that the key does not show in the process list). Stops on SIGTERM or SIGINT.
 */
import { parseArgs } from 'node:util';
import { AzureFilesFake } from './azure-files.fake.js';

const { values } = parseArgs({ options: { root: { type: 'string' }, port: { type: 'string' } } });
const account = process.env.XFER_FAKE_AZURE_FILES_ACCOUNT;
const key = process.env.XFER_FAKE_AZURE_FILES_KEY;
if (!values.root || !values.port || !account || !key) {
  process.stderr.write('usage: XFER_FAKE_AZURE_FILES_ACCOUNT=… XFER_FAKE_AZURE_FILES_KEY=… node main.js --root DIR --port PORT\n');
  process.exit(2);
}
const fake = new AzureFilesFake({ root: values.root, account, key });
const port = await fake.listen(Number(values.port));
process.stdout.write(`Azure Files fake (not the Azure service) for account ${account} on http://127.0.0.1:${port}/${account}\n`);
const stop = () => void fake.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
