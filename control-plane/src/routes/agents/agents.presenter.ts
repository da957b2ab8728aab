import type { Agent, ConnectionType } from '@xfer/shared';
import type { StoredAgent } from '../../plugins/app/agents/index.js';

/** The read shape of an agent; `online` from AgentsService.isOnline, `runningJobs` from its runningJobsOf. The token hash never leaves. */
export function presentAgent(doc: StoredAgent, runningJobs: string[], online: boolean): Agent {
  return {
    id: String(doc._id),
    name: doc.name,
    labels: [...doc.labels],
    status: online ? 'online' : 'offline',
    last_seen_at: doc.last_seen_at ? doc.last_seen_at.toISOString() : null,
    version: doc.version ?? null,
    hostname: doc.hostname ?? null,
    connector_types: [...doc.connector_types] as ConnectionType[],
    running_jobs: runningJobs,
    created_at: doc.created_at.toISOString(),
  };
}
