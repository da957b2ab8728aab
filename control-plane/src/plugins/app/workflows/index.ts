import fp from 'fastify-plugin';
import { Loop } from '../../../lib/loop.js';
import { SourceSettler } from './settle-step.js';
import { WorkflowRuns } from './workflow-runs.js';
import { WorkflowsService } from './workflows.service.js';

export { WorkflowsService, presentWorkflow, type BeforeWrite, type StoredWorkflow } from './workflows.service.js';
export { WorkflowRuns, presentRun, RUN_LOCK_MS, type RunStart, type StoredWorkflowRun } from './workflow-runs.js';
export { SourceSettler } from './settle-step.js';

declare module 'fastify' {
  interface FastifyInstance {
    workflows: WorkflowsService;
    workflowRuns: WorkflowRuns;
  }
}

/** How often each instance sweeps the runs under way (a run whose transfer ended on another instance goes on within this). */
export const WORKFLOW_SWEEP_MS = 5_000;

/**
 * The workflows domain (docs/automation.md "Workflows", docs/architecture.md "Workflows"): the
 * account's workflows and runs (`app.workflows`), the run engine (`app.workflowRuns`, which
 * schedules and watchers start runs through), told of every transfer this instance ends, and a
 * sweep on every instance (started when the app is ready, stopped before it closes).
 */
export default fp(
  async (app) => {
    const settler = new SourceSettler({ db: app.db, agents: app.agents, requests: app.agentRequests });
    const runs = new WorkflowRuns({
      db: app.db, transfers: app.transfers, parameters: app.parameters, settler, outbox: app.outbox, email: app.notificationDeliverer,
      wakeDispatcher: () => app.dispatcher.wake(), log: app.log,
    });
    app.transfers.onEnded((job) => runs.transferEnded(job));
    const sweep = new Loop(() => runs.sweep().then(() => {}), WORKFLOW_SWEEP_MS, (err) => app.log.warn({ err }, 'workflows: a sweep failed; retrying on the next'));
    app.decorate('workflows', new WorkflowsService({ db: app.db, parameters: app.parameters, runs }));
    app.decorate('workflowRuns', runs);
    app.addHook('onReady', async () => sweep.start());
    // close() aborts first: a sweep waiting on an agent's answer stops waiting.
    app.addHook('preClose', async () => {
      await Promise.all([runs.close(), sweep.stop()]);
    });
  },
  { name: 'workflows', dependencies: ['mongoose', 'outbox', 'transfers', 'agents', 'parameters', 'notifications'] },
);
