// Releases the services this run used; a service stops only if this run was its last user and
// nobody pinned it with `npm run services -- up`, so a developer's or a parallel run's servers stay.
import { releaseServices } from '../../e2e/dist/services/index.js';
import { TEST_SERVICES } from './global-setup.mjs';

export default async function globalTeardown() {
  await releaseServices(TEST_SERVICES, {
    env: process.env,
    log: (msg) => process.stderr.write(`jest teardown: ${msg}\n`),
  });
}
