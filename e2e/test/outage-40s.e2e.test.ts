import { serverOutage } from './support/outage.js';

/** Jobs outlive the control plane: kill -9 of the server mid-job, back after 40 s (the 3-minute case runs in its own file, in parallel). */
test('kill -9 of the server mid-job, back after 40 s: the job completes, counters equal to the destination', async () => {
  await serverOutage(40_000);
}, 600_000);
