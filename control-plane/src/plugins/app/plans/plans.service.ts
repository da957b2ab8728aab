import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { Types } from 'mongoose';
import type { ListPlanItemsQuery, Page, PlanItem, PlanSummary } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { TransferPlanDoc } from '../../../models/transfer-plan.model.js';
import { planBatchId } from '../../../models/transfer-plan-batch.model.js';
import { BadRequestError, ConflictError, GoneError, NotFoundError } from '../../../errors.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import { Notifier } from '../../../lib/notifier.js';
import { toObjectId } from '../../../lib/pagination.js';
import type { ConnectionsService } from '../connections/index.js';
import { jobOptions, presentedOptions, type StoredTransfer, type TransfersService } from '../transfers/index.js';
import type { AgentsService, AgentHub, AgentSession } from '../agents/index.js';
import { chooseRun } from '../agents/index.js';
import type { PlanMessage } from '../agents/events.js';

export type StoredPlan = TransferPlanDoc & { _id: Types.ObjectId };
/** Where a walk through a plan's items is: batch `seq`, position `index` in it. */
interface Place { seq: number; index: number }
type AccountId = string | Types.ObjectId;
type Payload<T extends PlanMessage['type']> = Extract<PlanMessage, { type: T }>['payload'];

/** What PlansService needs. */
export interface PlansServiceOptions {
  db: Models;
  hub: AgentHub;
  agents: AgentsService;
  transfers: TransfersService;
  connections: ConnectionsService;
  /** Whether this control plane relays (a transfer only relays can run cannot be planned: 409). */
  relays: () => boolean;
  /** How long a plan may be executed after its creation (XFER_PLAN_TTL). */
  ttlMs: number;
  /** A blocking plan request reads the plan at least this often (it may be completed on another instance). */
  pollMs: number;
  log: FastifyBaseLogger;
}

const planNotFound = (id: string) => new NotFoundError(`Plan ${id} not found`);

/**
 * A plan not sent to its agent this long after it was made fails: the agent went offline (or its
 * instance died) before the instance holding its socket could send it.
 */
const UNSENT_GRACE_MS = 30_000;
/** How often `pump` looks for plans to fail (expired, never sent). */
const SWEEP_EVERY_MS = 5_000;

/** The API's cursor of plan items: the place of the last item looked at (`seq`.`index`), base64url. */
function encodeCursor(at: Place): string {
  return Buffer.from(`${at.seq}.${at.index}`, 'utf8').toString('base64url');
}
function decodeCursor(cursor: string): Place {
  const m = /^(\d{1,9})\.(-1|\d{1,9})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m) throw new BadRequestError('cursor is not a cursor returned by this list');
  return { seq: Number(m[1]), index: Number(m[2]) };
}

/** Batches one page of `GET …/plan/items?action=` reads at most: a rare action in a large plan gives short pages, never a long request. */
const MAX_BATCHES_PER_PAGE = 20;

/** A stored item as the API and `job.plan.page` carry it (plan-protocol.ts PlanItem). */
export function presentItem(doc: PlanItem): PlanItem {
  const side = (s: { size?: number | null; mtime?: string | null; checksum?: string | null } | null | undefined) =>
    s ? { size: s.size ?? 0, ...(s.mtime ? { mtime: s.mtime } : {}), ...(s.checksum ? { checksum: s.checksum } : {}) } : undefined;
  const source = side(doc.source);
  const destination = side(doc.destination);
  return { path: doc.path, action: doc.action as PlanItem['action'], reason: doc.reason, ...(source ? { source } : {}), ...(destination ? { destination } : {}) };
}

/** Whether an item's path stays under the transfer's roots: relative, no `.`/`..` or empty segment (docs/security.md). */
function relativePath(path: string): boolean {
  return !path.startsWith('/') && !path.includes('\\') && !path.includes('\0') && path.split('/').every((s) => s !== '' && s !== '.' && s !== '..');
}

/**
 * Plans of transfers (issue 25; docs/api.md "Sync, move and plans"): computed by one agent that
 * serves both connections and said `hello.sync` (plan-protocol.ts), stored as they stream in,
 * read by the API, and paged to the agent that applies one (`job.plan.query`).
 *
 * A plan is created `planning` with its agent; the instance holding that agent's socket sends the
 * `plan.assign` (`pump`, on this instance at once, on the others by their loop), and the agent's
 * frames arrive there. Items are insert-only batch documents keyed by (plan, batch number)
 * (models/transfer-plan-batch.model.ts): path order without a sort on paths, a batch sent twice
 * stored once, every read a bare `_id` lookup. Only the latest plan of a
 * transfer is kept, and the one its current run applies; the rest go when a new plan is made, and
 * all of them with the transfer.
 */
export class PlansService {
  /** Notified with the plan id when a plan made on this instance ends. */
  private readonly changes = new Notifier();
  private lastSweep = 0;
  /** Where each session's `job.plan.query` of each job left off: the next query usually goes on from there. */
  private readonly cursors = new WeakMap<AgentSession, Map<string, { path: string; seq: number; index: number }>>();

  constructor(private readonly o: PlansServiceOptions) {}

  /**
   * What the transfer is, for telling at execute time whether it changed since it was planned: its
   * paths and options, and where its connections point (type, host, port, path, options). Not the
   * connections' credentials: an agent rotating a refresh token (`connection.credentials`) changes
   * nothing a plan saw, and each item is checked against both sides when it is applied anyway.
   */
  private async definition(job: StoredTransfer): Promise<string> {
    const ids = [job.source_connection_id, job.destination_connection_id];
    const conns = await this.o.db.connections.find({ _id: { $in: ids }, account_id: job.account_id }, { type: 1, host: 1, port: 1, path: 1, options: 1 }).lean();
    const where = ids.map((id) => {
      const c = conns.find((d) => d._id.equals(id));
      return c ? [String(id), c.type, c.host ?? null, c.port ?? null, c.path, c.options ?? null] : [String(id)];
    });
    return createHash('sha256').update(JSON.stringify({
      source: [...where[0]!, job.source_path], destination: [...where[1]!, job.destination_path], options: presentedOptions(job.options),
    })).digest('hex');
  }

  /**
   * A new plan of `job`, `planning`, on an online agent that serves both its connections and said
   * `hello.sync` (one on this instance when there is one); 503 when none can now, 409 when only a
   * relay could run the transfer (a plan is computed and applied by one agent seeing both sides).
   * Older plans of the transfer are removed, but the one its current run applies.
   */
  async create(accountId: AccountId, job: StoredTransfer): Promise<StoredPlan> {
    const [source, destination] = await this.o.transfers.connectionsOf(job);
    const agents = await this.o.agents.factsOf(accountId);
    const choice = chooseRun(source, destination, agents, this.o.relays(), { sync: true, direct: true });
    if (choice.mode !== 'direct') {
      if (chooseRun(source, destination, agents, this.o.relays(), { sync: true }).mode === 'relay') {
        throw new ConflictError(`Transfer ${String(job._id)} can only run relayed (no agent serves both of its connections): a plan needs one agent that serves both (agent_id or agent_pool); run it without a plan instead`);
      }
      throw choice.mode === null ? choice.problem : new ConflictError('No agent can compute this plan');
    }
    const agent = choice.agents.find((a) => this.o.hub.get(String(a._id))) ?? choice.agents[0]!;
    const now = new Date();
    const plan = (await this.o.db.transferPlans.create({
      account_id: job.account_id, transfer_id: job._id, status: 'planning', agent_id: agent._id, definition: await this.definition(job),
      options: jobOptions(job.options, true), created_at: now, expires_at: new Date(now.getTime() + this.o.ttlMs),
    })).toObject() as StoredPlan;
    await this.removeOlder(job, plan._id);
    await this.pump();
    return (await this.o.db.transferPlans.findById(plan._id).lean<StoredPlan>()) ?? plan;
  }

  /** Removes the transfer's plans but `keep` and the one its current run applies, with their items. */
  private async removeOlder(job: StoredTransfer, keep: Types.ObjectId): Promise<void> {
    const current = await this.o.db.transfers.findById(job._id, { plan_id: 1, status: 1 }).lean();
    const inUse = current?.plan_id && (current.status === 'queued' || current.status === 'in-progress') ? [current.plan_id] : [];
    const old = await this.o.db.transferPlans.find({ transfer_id: job._id, _id: { $nin: [keep, ...inUse] } }, { _id: 1 }).lean();
    if (old.length === 0) return;
    const ids = old.map((p) => p._id);
    await this.o.db.transferPlanBatches.deleteMany({ plan_id: { $in: ids } });
    await this.o.db.transferPlans.deleteMany({ _id: { $in: ids } });
  }

  /**
   * Sends `plan.assign` for the plans waiting for an agent whose socket is here (each claimed by
   * a conditional update, so sent once); every few seconds, fails the plans still planning past
   * their expiry, and those no instance sent within UNSENT_GRACE_MS.
   */
  async pump(): Promise<void> {
    const now = new Date();
    if (now.getTime() - this.lastSweep >= SWEEP_EVERY_MS) {
      this.lastSweep = now.getTime();
      const stale = await this.o.db.transferPlans.find(
        { status: 'planning', $or: [{ expires_at: { $lte: now } }, { sent_at: null, created_at: { $lte: new Date(now.getTime() - UNSENT_GRACE_MS) } }] },
        { _id: 1, agent_id: 1, sent_at: 1 },
      ).lean();
      for (const p of stale) {
        const error = p.sent_at
          ? 'The plan was not complete before it expired (XFER_PLAN_TTL)'
          : 'The agent chosen to compute the plan went offline before it could be sent the plan';
        if (await this.end(p._id, null, { status: 'failed', error })) this.o.hub.get(String(p.agent_id))?.send('plan.cancel', { plan_id: String(p._id) });
      }
    }
    const local = this.o.hub.openSessions();
    if (local.length === 0) return;
    const waiting = await this.o.db.transferPlans.find(
      { status: 'planning', sent_at: null, agent_id: { $in: local.map((s) => new Types.ObjectId(s.agent.id)) } },
    ).lean<StoredPlan[]>();
    for (const plan of waiting) {
      const claimed = await this.o.db.transferPlans.findOneAndUpdate({ _id: plan._id, status: 'planning', sent_at: null }, { $set: { sent_at: new Date() } }, { new: true }).lean<StoredPlan>();
      if (claimed) await this.send(claimed);
    }
  }

  private async send(plan: StoredPlan): Promise<void> {
    const agentId = String(plan.agent_id);
    const session = this.o.hub.get(agentId);
    const job = await this.o.db.transfers.collection.findOne<StoredTransfer>({ _id: plan.transfer_id });
    if (!session || !job) {
      await this.end(plan._id, null, { status: 'failed', error: session ? 'The transfer was deleted' : 'The agent chosen to compute the plan went offline before it started' });
      return;
    }
    try {
      const [source, destination] = await Promise.all([
        this.o.connections.settingsFor(job.account_id, String(job.source_connection_id), agentId),
        this.o.connections.settingsFor(job.account_id, String(job.destination_connection_id), agentId),
      ]);
      const sent = session.send('plan.assign', {
        plan_id: String(plan._id), source, source_path: job.source_path, destination, destination_path: job.destination_path,
        options: plan.options as ReturnType<typeof jobOptions>,
      });
      if (!sent) await this.end(plan._id, agentId, { status: 'failed', error: `Agent ${session.agent.name} could not be sent the plan (its connection closed)` });
    } catch (err) {
      await this.end(plan._id, agentId, { status: 'failed', error: `The connections of the transfer could not be prepared for agent ${session.agent.name}: ${(err as Error).message}` });
    }
  }

  /** planning → ready or failed, once (from `agentId` when given); notifies the waiters here. */
  private async end(id: Types.ObjectId, agentId: string | null, set: Record<string, unknown>): Promise<StoredPlan | null> {
    const filter = { _id: id, status: 'planning', ...(agentId ? { agent_id: new Types.ObjectId(agentId) } : {}) };
    const ended = await this.o.db.transferPlans.findOneAndUpdate(filter, { $set: { ...set, completed_at: new Date() } }, { new: true }).lean<StoredPlan>();
    if (ended) this.changes.notify(String(id));
    return ended;
  }

  /** A session closed: the plans its agent was computing fail (a new plan is a new request). */
  async closed(session: AgentSession): Promise<void> {
    const planning = await this.o.db.transferPlans.find({ status: 'planning', agent_id: new Types.ObjectId(session.agent.id), sent_at: { $ne: null } }, { _id: 1 }).lean();
    for (const p of planning) await this.end(p._id, session.agent.id, { status: 'failed', error: `Agent ${session.agent.name} disconnected while computing the plan` });
  }

  /** Waits until the plan is no longer `planning` (or `signal` aborts) and returns it as stored then. */
  async waitForEnd(id: Types.ObjectId, signal: AbortSignal): Promise<StoredPlan | null> {
    for (;;) {
      const plan = await this.o.db.transferPlans.findById(id).lean<StoredPlan>();
      if (!plan || plan.status !== 'planning' || signal.aborted) return plan;
      await this.changes.wait(String(id), this.o.pollMs, signal);
    }
  }

  /** The latest plan of the caller's transfer; 404 when it has none. */
  async latest(job: StoredTransfer): Promise<StoredPlan> {
    const plan = await this.o.db.transferPlans.findOne({ transfer_id: job._id, account_id: job.account_id }).sort({ _id: -1 }).lean<StoredPlan>();
    if (!plan) throw new NotFoundError(`Transfer ${String(job._id)} has no plan; create one with POST /transfers/${String(job._id)}/plan`);
    return plan;
  }

  /** Batch `seq` of a plan's items (a bare `_id` read), or null past the last. */
  private async batch(planId: Types.ObjectId, seq: number): Promise<PlanItem[] | null> {
    const doc = await this.o.db.transferPlanBatches.collection.findOne<{ items: PlanItem[] }>({ _id: planBatchId(planId, seq) }, { projection: { items: 1 } });
    return doc?.items ?? null;
  }

  /**
   * Up to `limit` items after `from` (the place of the last one taken; null: from the first) that
   * `keep` accepts, reading at most `maxBatches` batches; `next` is where the walk stopped (null:
   * nothing follows).
   */
  private async walk(planId: Types.ObjectId, from: Place | null, limit: number, keep: (i: PlanItem) => boolean, maxBatches = Number.POSITIVE_INFINITY) {
    const taken: Array<PlanItem & { place: Place }> = [];
    let seq = from?.seq ?? 1;
    let index = from ? from.index + 1 : 0;
    for (let read = 0; read < maxBatches; read++, seq++, index = 0) {
      const items = await this.batch(planId, seq);
      if (!items) return { taken, next: null };
      for (; index < items.length; index++) {
        if (taken.length === limit) return { taken, next: { seq, index: index - 1 } };
        if (keep(items[index]!)) taken.push({ ...items[index]!, place: { seq, index } });
      }
    }
    // The batch budget is spent: go on from the start of the next batch.
    return { taken, next: { seq, index: -1 } };
  }

  /** One page of a plan's items in path order; `action` narrows them (a page may then be short before the end). */
  async items(plan: StoredPlan, query: ListPlanItemsQuery): Promise<Page<PlanItem>> {
    const { taken, next } = await this.walk(plan._id, query.cursor ? decodeCursor(query.cursor) : null, query.limit ?? 50,
      (i) => !query.action || i.action === query.action, MAX_BATCHES_PER_PAGE);
    const data = taken.map(({ place: _place, ...item }) => presentItem(item));
    // The walk may have stopped right before the end of the plan: no cursor to an empty page then.
    return { data, next_cursor: next && (await this.hasMore(plan._id, next)) ? encodeCursor(next) : null };
  }

  /** Whether an item follows `at`. */
  private async hasMore(planId: Types.ObjectId, at: Place): Promise<boolean> {
    const items = await this.batch(planId, at.seq);
    if (items && at.index + 1 < items.length) return true;
    return (await this.batch(planId, at.seq + 1)) !== null;
  }

  /**
   * The plan `planId` for an execute of `job`, checked: the caller's (404 otherwise, as for any
   * other account's id), of this transfer, ready, not expired (410), and made of the transfer as
   * it is now (409 once its connections, paths or options changed).
   */
  async executable(accountId: AccountId, job: StoredTransfer, planId: string): Promise<StoredPlan> {
    const _id = toObjectId(planId);
    const plan = _id && await this.o.db.transferPlans.findById(_id).lean<StoredPlan>();
    if (!plan || String(plan.account_id) !== String(accountId)) throw planNotFound(planId);
    const id = String(job._id);
    if (!plan.transfer_id.equals(job._id)) throw new ConflictError(`Plan ${planId} is a plan of transfer ${String(plan.transfer_id)}, not of transfer ${id}`);
    if (plan.status === 'planning') throw new ConflictError(`Plan ${planId} is still being computed; follow it with GET /transfers/${id}/plan`);
    if (plan.status === 'failed') throw new ConflictError(`Plan ${planId} failed (${plan.error ?? 'no reason given'}); create a new one with POST /transfers/${id}/plan`);
    if (plan.expires_at.getTime() <= Date.now()) {
      throw new GoneError(`Plan ${planId} expired at ${plan.expires_at.toISOString()}; create a new one with POST /transfers/${id}/plan`);
    }
    if (plan.definition !== await this.definition(job)) {
      throw new ConflictError(`Transfer ${id} changed since plan ${planId} was made (its connections, paths or options); create a new one with POST /transfers/${id}/plan`);
    }
    return plan;
  }

  /** The frames of plans from an agent (hub 'plan' event), in the session's order. */
  async message(session: AgentSession, message: PlanMessage): Promise<void> {
    switch (message.type) {
      case 'plan.items': return this.stored(session, message.payload);
      case 'plan.done': return this.done(session, message.payload);
      case 'plan.failed': {
        const plan = await this.planOf(session, message.payload.plan_id);
        if (plan) await this.end(plan._id, session.agent.id, { status: 'failed', error: message.payload.error });
        return;
      }
      case 'job.plan.query': return this.page(session, message.payload);
    }
  }

  /**
   * The plan `planId` being computed by this session's agent, of its account; null (logged) for
   * any other. `cancel`: tell the agent to stop computing it (it failed, expired, or went with its
   * transfer meanwhile), instead of listing on for nothing.
   */
  private async planOf(session: AgentSession, planId: string, cancel = false): Promise<StoredPlan | null> {
    const _id = toObjectId(planId);
    const plan = _id && await this.o.db.transferPlans.findById(_id).lean<StoredPlan>();
    const own = plan && String(plan.agent_id) === session.agent.id && String(plan.account_id) === session.agent.accountId;
    if (own && plan.status === 'planning') return plan;
    this.o.log.warn({ agentId: session.agent.id, planId }, 'a plan frame for a plan this agent is not computing: ignored');
    if (cancel) session.send('plan.cancel', { plan_id: planId });
    return null;
  }

  private async stored(session: AgentSession, p: Payload<'plan.items'>): Promise<void> {
    const plan = await this.planOf(session, p.plan_id, true);
    if (!plan) return;
    const outside = p.items.find((i) => !relativePath(i.path));
    if (outside) {
      await this.end(plan._id, session.agent.id, { status: 'failed', error: `The agent sent a plan item whose path is not relative to the transfer's root: ${JSON.stringify(outside.path.slice(0, 200))}` });
      return;
    }
    try {
      await this.o.db.transferPlanBatches.collection.insertOne({ _id: planBatchId(plan._id, p.seq), plan_id: plan._id, seq: p.seq, items: p.items });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }

  private async done(session: AgentSession, p: Payload<'plan.done'>): Promise<void> {
    const plan = await this.planOf(session, p.plan_id);
    if (!plan) return;
    // Frames of a session arrive in order: every batch is stored by now, or it never came.
    let arrived = 0;
    while (arrived < p.batches && await this.batch(plan._id, arrived + 1)) arrived++;
    if (arrived !== p.batches || await this.batch(plan._id, p.batches + 1)) {
      await this.end(plan._id, session.agent.id, { status: 'failed', error: `The plan is incomplete: the agent announced ${p.batches} batches of items, ${arrived} arrived` });
      return;
    }
    await this.end(plan._id, session.agent.id, { status: 'ready', summary: p.summary satisfies PlanSummary, fingerprint: p.fingerprint });
  }

  /**
   * Answers `job.plan.query`: the items of the plan of a job this session runs now (its current
   * attempt, its agent, its account) after the path `after`, in plan order. Any other query (a job
   * never given to it, another account's, finished or taken over meanwhile, one without a plan) is
   * answered with no items and `done`: the run asking is being stopped, and nothing is revealed.
   */
  private async page(session: AgentSession, q: Payload<'job.plan.query'>): Promise<void> {
    const none = () => session.send('job.plan.page', { request_id: q.request_id, items: [], done: true });
    const attempt = session.jobs.get(q.job_id);
    const jobId = toObjectId(q.job_id);
    const job = attempt !== undefined && jobId
      ? await this.o.db.transfers.findById(jobId, { account_id: 1, agent_id: 1, attempt: 1, status: 1, plan_id: 1 }).lean()
      : null;
    if (!job || !job.plan_id || job.status !== 'in-progress' || job.attempt !== attempt
      || String(job.agent_id) !== session.agent.id || String(job.account_id) !== session.agent.accountId) {
      this.o.log.warn({ agentId: session.agent.id, jobId: q.job_id }, 'plan items asked for a job this agent does not run with a plan: answered empty');
      none();
      return;
    }
    let cursors = this.cursors.get(session);
    if (!cursors) this.cursors.set(session, (cursors = new Map()));
    let from: Place | null = null;
    if (q.after !== undefined) {
      const known = cursors.get(q.job_id);
      from = known && known.path === q.after ? known : await this.find(job.plan_id, q.after);
      if (!from) {
        this.o.log.warn({ agentId: session.agent.id, jobId: q.job_id }, 'plan items asked after a path the plan does not have: answered empty');
        none();
        return;
      }
    }
    const { taken, next } = await this.walk(job.plan_id, from, q.limit, () => true);
    const last = taken[taken.length - 1];
    if (last) cursors.set(q.job_id, { path: last.path, ...last.place });
    const done = !next || !(await this.hasMore(job.plan_id, next));
    session.send('job.plan.page', { request_id: q.request_id, items: taken.map(({ place: _place, ...item }) => presentItem(item)), done });
  }

  /** The place of `path` in a plan (a walk through its batches: only for an agent that lost its place, a reconnect). */
  private async find(planId: Types.ObjectId, path: string): Promise<Place | null> {
    for (let seq = 1; ; seq++) {
      const items = await this.batch(planId, seq);
      if (!items) return null;
      const index = items.findIndex((i) => i.path === path);
      if (index >= 0) return { seq, index };
    }
  }
}
