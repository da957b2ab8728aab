import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import { encodeRelayChunk, MAX_RELAY_ENTRIES, RELAY_WINDOW_BYTES, type RelayEntry } from '@xfer/shared';
import type { App } from '../src/app.js';
import type { StoredTransfer } from '../src/plugins/app/transfers/index.js';
import { makeAgent, makeConnection, makeTransfer } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/** Relay tests' resources: two relay-capable agents, a job relayed between them, and what the dispatcher does for one. */

export interface RelayAgent {
  id: string;
  name: string;
  token: string;
  client: ProtocolClient;
}

/** A new agent of the account connected to `app` with `hello.relay` (or without, when `relay` is false). */
export async function relayAgent(app: App, owner: App, apiKey: string, relay = true): Promise<RelayAgent> {
  const agent = await makeAgent(owner, apiKey);
  const { client, welcome } = await ProtocolClient.connect(app, agent.token, { ...(relay ? { relay: true } : {}) });
  if (relay && welcome.relay !== true) throw new Error('the welcome did not offer relays');
  return { ...agent, client };
}

/**
 * A transfer sftp (source, pinned to `source`) → s3 (destination, pinned to `destination`) put
 * in the state the scheduler leaves a relayed run in: in progress, `mode: relay`, the two agents,
 * sent (`assigned_at`), at `attempt`.
 */
export async function relayedTransfer(app: App, apiKey: string, destination: { id: string }, source: { id: string }, attempt = 1): Promise<StoredTransfer> {
  const src = await makeConnection(app, apiKey, 'sftp', { agent_id: source.id });
  const dst = await makeConnection(app, apiKey, 's3', { agent_id: destination.id });
  const created = await makeTransfer(app, apiKey, src.id, dst.id);
  const now = new Date();
  await app.db.transfers.updateOne({ _id: new Types.ObjectId(created.id) }, { $set: {
    status: 'in-progress', mode: 'relay', attempt, agent_id: new Types.ObjectId(destination.id), source_agent_id: new Types.ObjectId(source.id),
    started_at: now, assigned_at: now, lease: { instance_id: null, expires_at: new Date(now.getTime() + 60_000), renewed_at: now },
  } });
  return (await app.db.transfers.collection.findOne<StoredTransfer>({ _id: new Types.ObjectId(created.id) }))!;
}

/**
 * What the dispatcher does for a relayed run (issue 14): the relayed `job.assign` to the
 * destination agent's session on `app` (no source settings), then `relays.start`.
 */
export async function assignRelay(app: App, job: StoredTransfer): Promise<void> {
  const id = String(job._id);
  const session = await eventually(async () => app.agentHub.get(String(job.agent_id)), 'the destination session is open');
  session.jobs.set(id, job.attempt);
  session.send('job.assign', {
    job_id: id, attempt: job.attempt, source_path: job.source_path,
    destination: await app.connections.loadSettings(job.account_id, String(job.destination_connection_id)),
    destination_path: job.destination_path,
    options: { overwrite: 'always', verify: 'checksum', concurrency: job.options!.concurrency },
    resume: job.attempt > 1, relay: { source_type: 'sftp' },
  });
  await app.relays.start(job, session);
}

/** `n` listing entries of files `prefix-<i>`, each `size` bytes. */
export const entries = (n: number, prefix = 'file', size = 100): RelayEntry[] =>
  Array.from({ length: n }, (_, i) => ({ path: `${prefix}-${i}`, kind: 'file' as const, size }));

/** Binary relay frames for `job` carrying these payload sizes, random bytes. */
export function frames(job: StoredTransfer, sizes: number[]): Buffer[] {
  return sizes.map((size) => encodeRelayChunk(String(job._id), job.attempt, randomBytes(size)));
}

/** The full window, as a destination grants it at first. */
export const FULL_CREDIT = { entries: MAX_RELAY_ENTRIES, bytes: RELAY_WINDOW_BYTES };

export const ref = (job: StoredTransfer) => ({ job_id: String(job._id), attempt: job.attempt });

/**
 * Waits until `job`'s attempt was taken over (TransfersService.interrupt took the run back to the
 * queue as the next attempt), makes sure that happened once, and returns why it ended. Later
 * attempts may be started and taken over again (the scheduler may pick an agent whose session has
 * just closed, before its registration is cleared): only this attempt counts.
 */
export async function takenOverOnce(job: StoredTransfer, interrupt: jest.SpiedFunction<App['transfers']['interrupt']>): Promise<string> {
  const effective = async () => {
    const done: string[] = [];
    for (const [i, [id, attempt, reason]] of interrupt.mock.calls.entries()) {
      if (String(id) !== String(job._id) || attempt !== job.attempt) continue;
      if (await (interrupt.mock.results[i]!.value as Promise<unknown>)) done.push(reason);
    }
    return done;
  };
  await eventually(async () => (await effective()).length >= 1, 'taken over');
  await new Promise((resolve) => setTimeout(resolve, 300));
  const reasons = await effective();
  expect(reasons).toHaveLength(1);
  return reasons[0]!;
}
