import type { Actor, Agent, ConnectionType } from '@xfer/shared';
import { effectiveSlots, isApproved, poolsOf, type AgentLoad, type StoredAgent } from '../../plugins/app/agents/index.js';

/**
 * The read shape of an agent; `online` from AgentsService.isOnline, `load` from its loadOf. The
 * token hash never leaves.
 */
export function presentAgent(doc: StoredAgent, load: AgentLoad, online: boolean): Agent {
  const total = effectiveSlots(doc);
  return {
    id: String(doc._id),
    name: doc.name,
    labels: [...doc.labels],
    agent_labels: [...(doc.agent_labels ?? [])],
    pools: poolsOf(doc),
    status: online ? 'online' : 'offline',
    last_seen_at: doc.last_seen_at ? doc.last_seen_at.toISOString() : null,
    version: doc.version ?? null,
    hostname: doc.hostname ?? null,
    connector_types: [...doc.connector_types] as ConnectionType[],
    running_jobs: load.running,
    max_jobs: doc.job_limit ?? null,
    agent_max_jobs: doc.max_jobs ?? null,
    slots: { total, running: load.slotsHeld, free: Math.max(0, total - load.slotsHeld) },
    relay: doc.relay === true,
    approved: isApproved(doc),
    approved_at: doc.approved_at ? doc.approved_at.toISOString() : null,
    approved_by: doc.approved_by?.type ? { type: doc.approved_by.type as Actor['type'], id: doc.approved_by.id ?? null } : null,
    created_at: doc.created_at.toISOString(),
  };
}
