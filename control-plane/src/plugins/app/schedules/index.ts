import fp from 'fastify-plugin';
import { ScheduleFiring } from './firing.js';
import { ScheduleRuns } from './schedule-runs.js';
import { SchedulesService } from './schedules.service.js';

export { SchedulesService, presentSchedule, type BeforeWrite } from './schedules.service.js';
export { ScheduleFiring } from './firing.js';
export { ScheduleRuns, presentRun, runStatus, STALE_START_MS, type StoredSchedule, type StoredScheduleRun } from './schedule-runs.js';

declare module 'fastify' {
  interface FastifyInstance {
    schedules: SchedulesService;
    scheduleFiring: ScheduleFiring;
  }
}

/** How often each instance looks for due schedules: a due time fires within about a second of it. */
export const SCHEDULE_TICK_MS = 1_000;

/**
 * The schedules domain: the account's schedules and their runs (`app.schedules`), and the firing
 * loop every instance runs (`app.scheduleFiring`, started when the app is ready, stopped before
 * it closes).
 */
export default fp(
  async (app) => {
    const runs = new ScheduleRuns({
      db: app.db, transfers: app.transfers, workflowRuns: app.workflowRuns, wakeDispatcher: () => app.dispatcher.wake(), log: app.log,
    });
    const firing = new ScheduleFiring({ db: app.db, runs, audit: app.audit, log: app.log, tickMs: SCHEDULE_TICK_MS });
    app.decorate('schedules', new SchedulesService({
      db: app.db, transfers: app.transfers, parameters: app.parameters, workflows: app.workflows, workflowRuns: app.workflowRuns, runs,
    }));
    app.decorate('scheduleFiring', firing);
    app.addHook('onReady', async () => firing.start());
    app.addHook('preClose', () => firing.stop());
  },
  { name: 'schedules', dependencies: ['mongoose', 'audit', 'transfers', 'agents', 'parameters', 'workflows'] },
);
