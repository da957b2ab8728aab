import { randomBytes } from 'node:crypto';
import type { Proc } from '../src/stack.js';
import { instanceOf, unfinished, waitFor } from './support/stack-helpers.js';
import {
  DESTINATION_POOL, SOURCE_POOL, expectRelayedCopy, expectResumed, killAgent, midRun, relaySuite, sourceEnded, startTransfer,
} from './support/relays.js';

/**
 * Relays across control-plane instances with the real binaries (issue 14 acceptance): two
 * `xfer-server`s over one database; agent A (pool `src`, the sftp end) is given only instance
 * 0's URL, agent B (pool `dst`, the s3 end) only instance 1's, so every relay is hosted by
 * instance 1 (it holds B) and reaches A through the peer link to instance 0. Jobs executed on
 * either API arrive byte-identical; kill -9 of the source agent mid-relay, with a second `src`
 * agent A2, is taken over and resumes. One instance: relay.e2e.test.ts.
 */
const METRICS_TOKEN = randomBytes(16).toString('hex');
const suite = relaySuite('e2e-relay-peers', {
  tree: { count: 300, bigBytes: 64 * 1024 * 1024 },
  stack: { instances: 2, serverEnv: { XFER_METRICS_TOKEN: METRICS_TOKEN } },
});
const agents = {} as Record<'a' | 'b', { id: string; name: string; proc: Proc }>;

beforeAll(async () => {
  const { stack } = suite;
  agents.a = { ...await stack.startAgent('peers-a', {}, ['--label', SOURCE_POOL], [0]), name: 'peers-a' };
  const b = await stack.api.data('POST', '/agents', { name: 'peers-b', labels: [DESTINATION_POOL] });
  agents.b = { id: b.id, name: 'peers-b', proc: stack.spawnAgent(b.token, {}, [], [1]) };
  await stack.waitForAgent(b.id, 'online');
}, 60_000);

/** One sample of an instance's Prometheus metrics (0 when the series has no sample yet). */
async function metric(instance: number, series: string): Promise<number> {
  const res = await fetch(suite.stack.urls[instance]!.replace(/\/api\/v1$/, '/metrics'), { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(res.status).toBe(200);
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

test('jobs executed on either instance\'s API are relayed from A (instance 0) to B (instance 1) over the peer link, byte-identical', async () => {
  const { stack } = suite;
  // The two sockets are on different instances: each agent was given one URL, and each instance holds one agent.
  // (The API shows an agent online before the agent logs its welcome.)
  const where = (proc: Proc) => {
    try {
      return instanceOf(stack, proc).index;
    } catch {
      return -1;
    }
  };
  expect(await waitFor('A and B to log their connection', async () => [where(agents.a.proc), where(agents.b.proc)], (i) => !i.includes(-1), 10_000)).toEqual([0, 1]);
  expect([await metric(0, 'xfer_agents_connected'), await metric(1, 'xfer_agents_connected')]).toEqual([1, 1]);

  const ids = [
    await startTransfer(stack.apis[0]!, suite.ids, 'peers on api 0', '/src', '/via-0'),
    await startTransfer(stack.apis[1]!, suite.ids, 'peers on api 1', '/src', '/via-1'),
  ];
  // While they run: instance 1 hosts the relays (it holds B), instance 0 serves their source sides to it (peer).
  let hosted = 0;
  let peered = 0;
  await waitFor('both relays to end', async () => {
    hosted = Math.max(hosted, await metric(1, 'xfer_relays_active{role="host"}'));
    peered = Math.max(peered, await metric(0, 'xfer_relays_active{role="peer"}'));
    return Promise.all(ids.map((id, i) => stack.apis[i]!.data('GET', `/transfers/${id}`)));
  }, (views) => views.every((v) => !unfinished(v)), 180_000);
  expect(hosted).toBeGreaterThanOrEqual(1);
  expect(peered).toBeGreaterThanOrEqual(1);

  let bytes = 0;
  for (const [i, id] of ids.entries()) {
    const { view } = await expectRelayedCopy(suite, stack.apis[i]!, id, `via-${i}`);
    expect(view).toMatchObject({ attempts: 1, last_interruption: null, agent_id: agents.b.id, source_agent_id: agents.a.id, files_transferred: suite.tree.size });
    bytes += view.bytes_transferred as number;
    await waitFor('A\'s source side to end', async () => sourceEnded(agents.a.proc, id, 1), (l) => l !== undefined, 10_000);
  }
  // Both relays were hosted by instance 1, which forwarded every byte to B; instance 0 hosted none.
  expect(await metric(1, 'xfer_relays_ended_total{outcome="finished"}')).toBe(2);
  expect(await metric(1, 'xfer_relay_bytes_total')).toBeGreaterThan(bytes);
  expect(await metric(0, 'xfer_relay_bytes_total')).toBe(0);
}, 300_000);

test('kill -9 of the source agent mid-relay (its socket on the peer instance), with A2 in pool src: taken over, completes from A2, resumes', async () => {
  const { stack } = suite;
  const a2 = { ...await stack.startAgent('peers-a2', {}, ['--label', SOURCE_POOL], [0]), name: 'peers-a2' };
  const sources = [agents.a, a2];
  const id = await startTransfer(stack.apis[1]!, suite.ids, 'peers source failover', '/src', '/source-failover');
  const before = await midRun(suite, stack.api, id);
  expect(before).toMatchObject({ status: 'in-progress', attempt: 1, mode: 'relay', agent_id: agents.b.id, last_interruption: null });
  const victim = sources.find((a) => a.id === before.source_agent_id)!;
  const survivor = sources.find((a) => a !== victim)!;
  const killed = await killAgent(suite, victim.proc, 'source-failover');

  const final = await waitFor('the transfer to end', () => stack.api.data('GET', `/transfers/${id}`), (j) => !unfinished(j), 300_000);
  expect(final).toMatchObject({
    status: 'completed', attempt: 2, attempts: 2, takeovers: 1, mode: 'relay', agent_id: agents.b.id, source_agent_id: survivor.id,
    last_interruption: { attempt: 1, agent_id: agents.b.id, reason: `Relay source agent ${victim.name} disconnected` },
  });
  const { results } = await expectRelayedCopy(suite, stack.api, id, 'source-failover');
  await expectResumed(suite, stack.api, id, 'source-failover', results, killed);
  await waitFor('the survivor\'s source side to end', async () => sourceEnded(survivor.proc, id, 2), (l) => l !== undefined, 10_000);
  expect(await metric(1, 'xfer_relays_ended_total{outcome="lost"}')).toBe(1);
}, 300_000);
