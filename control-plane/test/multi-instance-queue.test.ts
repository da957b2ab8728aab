import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import type { AgentSession, RelayStarter } from '../src/plugins/app/agents/index.js';
import type { StoredTransfer } from '../src/plugins/app/transfers/index.js';
import { buildTestApp, createAccount, loopPasses } from './helper.js';
import { counters, getTransfer, makeAgent, makeConnection, makeTransfer, transferAction } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * Two control-plane instances on one database schedule side by side (issue 14): each starts
 * transfers on the agents whose sockets it holds, a relay's source slot may be claimed from
 * either, and nothing but the database connects them. Whatever the interleaving, no attempt is
 * started twice and no agent runs more jobs than its slots.
 */
let a: App;
let b: App;
const relays: RelayStarter = { start: async (_job: StoredTransfer, _destination: AgentSession) => {} };

beforeAll(async () => {
  const settings = { dispatchPollMs: 20, agentHeartbeatMs: 200, jobLeaseMs: 5_000 };
  a = await buildTestApp(settings);
  b = await buildTestApp({ ...settings, databaseName: a.config.databaseName, masterKeys: a.config.masterKeys });
  // A fake RelayStarter: the relays' forwarding is not what is tested here.
  for (const app of [a, b]) app.dispatcher.relayWith(relays);
  await a.listen({ host: '127.0.0.1', port: 0 });
  await b.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await b.close();
  await a.close();
});

/**
 * A fake agent that runs each job it is given for a few milliseconds and completes it, keeping
 * count of what it runs at once and of every (job, attempt) it was given.
 */
class BusyAgent {
  readonly given: string[] = [];
  running = new Set<string>();
  most = 0;
  private constructor(readonly id: string, readonly client: ProtocolClient) {
    client.ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as { type: string; payload: { job_id: string; attempt: number } };
      if (message.type !== 'job.assign') return;
      const { job_id: jobId, attempt } = message.payload;
      this.given.push(`${jobId}#${attempt}`);
      this.running.add(jobId);
      this.most = Math.max(this.most, this.running.size);
      client.send('job.accepted', { job_id: jobId });
      setTimeout(() => {
        this.running.delete(jobId);
        client.send('job.completed', { job_id: jobId, ...counters(1, 1, 1) });
      }, 5 + Math.floor(Math.random() * 25));
    });
  }

  static async start(on: App, key: string, hello: Parameters<typeof ProtocolClient.connect>[2], extra: Record<string, unknown> = {}): Promise<BusyAgent> {
    const agent = await makeAgent(on, key, extra);
    return new BusyAgent(agent.id, (await ProtocolClient.connect(on, agent.token, hello)).client);
  }
}

/** The most slots any of these agents held at once, sampled until `done` resolves. */
async function sampleSlots(on: App, agentIds: string[], done: Promise<unknown>): Promise<number> {
  let most = 0;
  let finished = false;
  void done.finally(() => (finished = true));
  while (!finished) {
    for (const id of agentIds) most = Math.max(most, await on.db.agentSlots.countDocuments({ agent_id: new Types.ObjectId(id) }));
    await new Promise((r) => setTimeout(r, 5));
  }
  return most;
}

/**
 * `done`, or after `ms` an error telling what is stuck (the transfers not ended, their queue
 * entries and the slots of their agents) instead of a bare test timeout.
 */
async function orStuck<T>(on: App, ids: string[], agentIds: string[], done: Promise<T>, ms = 120_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      void (async () => {
        const objectIds = ids.map((id) => new Types.ObjectId(id));
        const open = await on.db.transfers.find({ _id: { $in: objectIds }, status: { $in: ['queued', 'in-progress'] } },
          { status: 1, attempt: 1, queued_at: 1, agent_id: 1, source_agent_id: 1, assigned_at: 1, accepted_at: 1, takeovers: 1 }).lean();
        const queue = await on.db.transferQueue.find({ _id: { $in: objectIds } }).lean();
        const slots = await on.db.agentSlots.find({ agent_id: { $in: agentIds.map((id) => new Types.ObjectId(id)) } }).lean();
        reject(new Error(`not done after ${ms / 1000} s: ${JSON.stringify({ open, queue, slots })}`));
      })();
    }, ms);
  });
  try {
    return await Promise.race([done, stuck]);
  } finally {
    clearTimeout(timer);
  }
}

test('a pool with agents on both instances: 30 transfers executed on both, each attempt started once, no agent over its 2 slots', async () => {
  const { apiKey: key } = await createAccount(a);
  const agents = [
    await BusyAgent.start(a, key, { max_jobs: 2 }, { labels: ['race'] }), await BusyAgent.start(a, key, { max_jobs: 2 }, { labels: ['race'] }),
    await BusyAgent.start(b, key, { max_jobs: 2 }, { labels: ['race'] }), await BusyAgent.start(b, key, { max_jobs: 2 }, { labels: ['race'] }),
  ];
  const src = await makeConnection(a, key, 'sftp', { agent_pool: 'race' });
  const dst = await makeConnection(a, key, 's3', { agent_pool: 'race' });
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) ids.push((await makeTransfer(a, key, src.id, dst.id)).id);
  const all = Promise.all(ids.map((id, i) => transferAction(i % 2 ? a : b, key, id, 'execute')));
  const [answers, slots] = await orStuck(a, ids, agents.map((g) => g.id), Promise.all([all, sampleSlots(a, agents.map((g) => g.id), all)]));
  expect(answers.map((r) => r.json())).toEqual(ids.map(() => ({ success: true, files_transferred: 1, bytes_transferred: 1 })));
  const given = agents.flatMap((g) => g.given).sort();
  expect(given).toEqual(ids.map((id) => `${id}#1`).sort());
  expect(Math.max(...agents.map((g) => g.most))).toBeLessThanOrEqual(2);
  expect(slots).toBeLessThanOrEqual(2);
  // Both instances scheduled: every agent ran some.
  expect(agents.every((g) => g.given.length > 0)).toBe(true);
  // An execute answers once it reads the end, which the slots' release follows (transfer-states.ts ended()).
  const account = new Types.ObjectId((await a.db.agents.findById(agents[0]!.id).lean())!.account_id);
  await eventually(async () => (await a.db.agentSlots.countDocuments({ account_id: account })) === 0, 'every slot released');
  for (const g of agents) g.client.close();
}, 180_000);

test('relays: destinations on both instances compete for one source agent\'s 2 slots, claimed exactly; each relayed attempt starts once', async () => {
  const { apiKey: key } = await createAccount(a);
  const source = await BusyAgent.start(a, key, { connector_types: ['sftp'], relay: true, max_jobs: 2 }, { labels: ['src'] });
  const destinations = [
    await BusyAgent.start(a, key, { connector_types: ['s3'], relay: true, max_jobs: 4 }, { labels: ['dst'] }),
    await BusyAgent.start(b, key, { connector_types: ['s3'], relay: true, max_jobs: 4 }, { labels: ['dst'] }),
  ];
  const src = await makeConnection(a, key, 'sftp', { agent_pool: 'src' });
  const dst = await makeConnection(a, key, 's3', { agent_pool: 'dst' });
  const ids: string[] = [];
  for (let i = 0; i < 16; i++) ids.push((await makeTransfer(a, key, src.id, dst.id)).id);
  const all = Promise.all(ids.map((id, i) => transferAction(i % 2 ? a : b, key, id, 'execute')));
  const [answers, sourceSlots] = await orStuck(a, ids, [source.id, ...destinations.map((d) => d.id)], Promise.all([all, sampleSlots(a, [source.id], all)]));
  expect(answers.every((r) => r.json().success === true)).toBe(true);
  expect(sourceSlots).toBeLessThanOrEqual(2);
  expect(destinations.flatMap((d) => d.given).sort()).toEqual(ids.map((id) => `${id}#1`).sort());
  expect(source.given).toEqual([]);
  for (const id of ids) expect(await getTransfer(a, key, id)).toMatchObject({ mode: 'relay', source_agent_id: source.id, attempts: 1 });
  await eventually(async () => (await a.db.agentSlots.countDocuments({ agent_id: new Types.ObjectId(source.id) })) === 0, 'source slots released');
  for (const g of [source, ...destinations]) g.client.close();
}, 180_000);

test('a relay waiting for both its agents gets its source agent\'s next free slot before younger direct transfers there', async () => {
  const { apiKey: key } = await createAccount(a);
  // S (on A) serves both ends of the direct transfers and the source of the relayed one; D (on B)
  // its destination, busy at first with another relay (from T).
  const s = await makeAgent(a, key, { labels: ['mixed-src'] });
  const t = await makeAgent(a, key, { labels: ['other-src'] });
  const d = await makeAgent(a, key, { labels: ['mixed-dst'] });
  const { client: sc } = await ProtocolClient.connect(a, s.token, { connector_types: ['sftp', 's3'], relay: true, max_jobs: 1 });
  const { client: tc } = await ProtocolClient.connect(b, t.token, { connector_types: ['sftp'], relay: true, max_jobs: 1 });
  const { client: dc } = await ProtocolClient.connect(b, d.token, { connector_types: ['s3'], relay: true, max_jobs: 1 });
  const fromS = await makeConnection(a, key, 'sftp', { agent_pool: 'mixed-src' });
  const fromT = await makeConnection(a, key, 'sftp', { agent_pool: 'other-src' });
  const toS = await makeConnection(a, key, 's3', { agent_id: s.id });
  const toD = await makeConnection(a, key, 's3', { agent_pool: 'mixed-dst' });
  const run = async (from: string, to: string) => {
    const job = await makeTransfer(a, key, from, to);
    expect((await transferAction(a, key, job.id, 'execute', '?wait=false')).statusCode).toBe(202);
    return job.id;
  };
  const done = (client: ProtocolClient, id: string) => {
    client.send('job.accepted', { job_id: id });
    client.send('job.completed', { job_id: id, ...counters(1, 1, 1) });
  };
  const busyD = await run(fromT.id, toD.id);
  expect((await dc.next('job.assign')).payload.job_id).toBe(busyD);
  const first = await run(fromS.id, toS.id);
  expect((await sc.next('job.assign')).payload.job_id).toBe(first);
  const relayed = await run(fromS.id, toD.id);
  const younger = [await run(fromS.id, toS.id), await run(fromS.id, toS.id)];

  // S's slot frees while D is still busy: it is held back for the relay, the oldest transfer that may use it.
  done(sc, first);
  await eventually(async () => (await getTransfer(a, key, first)).status === 'completed', 'first completed');
  await eventually(async () => (await a.db.agentSlots.countDocuments({ agent_id: new Types.ObjectId(s.id) })) === 0, "S's slot released");
  // S's socket is on A, whose coordination loop alone may start work on S: two of its passes (each
  // schedules, then dispatches) see the slot free. The loop calls the dispatcher's private tick.
  await loopPasses(a.dispatcher, 'tick', 2);
  expect(sc.all('job.assign').map((m) => m.payload.job_id)).toEqual([first]);
  expect(await getTransfer(a, key, younger[0]!)).toMatchObject({ status: 'queued', queue_position: 2 });

  // D frees: the relay starts with S as its source; the younger ones wait for S again.
  done(dc, busyD);
  expect((await dc.next('job.assign')).payload).toMatchObject({ job_id: relayed, relay: { source_type: 'sftp' } });
  expect(await getTransfer(a, key, relayed)).toMatchObject({ mode: 'relay', source_agent_id: s.id, agent_id: d.id });
  done(dc, relayed);
  expect((await sc.next('job.assign')).payload.job_id).toBe(younger[0]);
  for (const c of [sc, tc, dc]) c.close();
}, 180_000);
