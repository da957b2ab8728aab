import { serverOutage } from './support/outage.js';

/** Jobs outlive the control plane: kill -9 of the server mid-job, back after 3 minutes (its own file so jest runs it beside the rest). */
test('kill -9 of the server mid-job, back after 3 min: the job completes, counters equal to the destination', async () => {
  await serverOutage(180_000);
}, 900_000);
