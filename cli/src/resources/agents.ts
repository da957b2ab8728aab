import { Args } from '@oclif/core';
import type { Agent } from '@xfer/shared';
import type { Column } from '../output.js';

export const agentColumns: Column<Agent>[] = [
  { header: 'id', get: (a) => a.id },
  { header: 'name', get: (a) => a.name },
  { header: 'status', get: (a) => a.status },
  { header: 'approved', get: (a) => (a.approved ? 'yes' : 'pending') },
  { header: 'pools', get: (a) => a.pools.join(',') },
  { header: 'slots', get: (a) => `${a.slots.running}/${a.slots.total}` },
  { header: 'version', get: (a) => a.version },
  { header: 'hostname', get: (a) => a.hostname },
  { header: 'running_jobs', get: (a) => a.running_jobs.length },
  { header: 'last_seen_at', get: (a) => a.last_seen_at },
];

export const agentIdArg = { id: Args.string({ description: 'Agent id', required: true }) };
