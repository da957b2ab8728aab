// Starts (or reuses) the real servers the tests need and hands their settings to the test
// workers through process.env, which jest copies into every worker it forks after this.
import { ensureServices } from '../../e2e/dist/services/index.js';

/**
 * Services every test run gets; a test file uses MONGODB_URI with a database name of its own, a
 * directory of its own under XFER_TEST_SFTP_ROOT, buckets of its own on XFER_TEST_S3_ENDPOINT.
 */
export const TEST_SERVICES = ['mongodb', 'sftp', 's3', 'webdav', 'apache-dav', 'blob', 'fileshare', 'ftp', 'smb', 'smb-signed', 'onedrive', 'nfs', 'clamd'];

export default async function globalSetup() {
  const { env } = await ensureServices(TEST_SERVICES, {
    env: process.env,
    log: (msg) => process.stderr.write(`\njest setup: ${msg}\n`),
  });
  Object.assign(process.env, env);
}
