import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import type { AgentSession, RelayStarter } from '../src/plugins/app/agents/index.js';
import type { StoredTransfer } from '../src/plugins/app/transfers/index.js';
import { buildTestApp, createAccount } from './helper.js';
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
  const [answers, slots] = await Promise.all([all, sampleSlots(a, agents.map((g) => g.id), all)]);
  expect(answers.map((r) => r.json())).toEqual(ids.map(() => ({ success: true, files_transferred: 1, bytes_transferred: 1 })));
  const given = agents.flatMap((g) => g.given).sort();
  expect(given).toEqual(ids.map((id) => `${id}#1`).sort());
  expect(Math.max(...agents.map((g) => g.most))).toBeLessThanOrEqual(2);
  expect(slots).toBeLessThanOrEqual(2);
  // Both instances scheduled: every agent ran some.
  expect(agents.every((g) => g.given.length > 0)).toBe(true);
  expect(await a.db.agentSlots.countDocuments({ account_id: new Types.ObjectId((await a.db.agents.findById(agents[0]!.id).lean())!.account_id) })).toBe(0);
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
  const [answers, sourceSlots] = await Promise.all([all, sampleSlots(a, [source.id], all)]);
  expect(answers.every((r) => r.json().success === true)).toBe(true);
  expect(sourceSlots).toBeLessThanOrEqual(2);
  expect(destinations.flatMap((d) => d.given).sort()).toEqual(ids.map((id) => `${id}#1`).sort());
  expect(source.given).toEqual([]);
  for (const id of ids) expect(await getTransfer(a, key, id)).toMatchObject({ mode: 'relay', source_agent_id: source.id, attempts: 1 });
  await eventually(async () => (await a.db.agentSlots.countDocuments({ agent_id: new Types.ObjectId(source.id) })) === 0, 'source slots released');
  for (const g of [source, ...destinations]) g.client.close();
}, 180_000);
