import { CloseCodes } from '@xfer/shared';
import { testAgent } from './helpers/test-agent.js';
import { TestControlPlane } from './helpers/test-control-plane.js';

/**
 * An agent given several control-plane URLs (instances with no load balancer in front): real
 * WebSocket servers on loopback play two or three instances. The session starts at a random URL
 * (the tests fix the draw) and moves to the next one on every failed dial or lost session.
 */
const servers: TestControlPlane[] = [];
async function instances(n: number): Promise<TestControlPlane[]> {
  const started = await Promise.all(Array.from({ length: n }, () => TestControlPlane.start()));
  servers.push(...started);
  return started;
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close().catch(() => {})));
});

/** Draws `first` for the pick of the first URL, then mid-range jitter for the backoff (short: base 20 ms). */
function draws(first: number): () => number {
  let n = 0;
  return () => (n++ === 0 ? first : 0.5);
}

function agentOf(urls: string[], first: number, backoff = { reconnectBaseMs: 20, reconnectMaxMs: 100 }) {
  return testAgent(urls, { session: { ...backoff, handshakeTimeoutMs: 5000, random: draws(first) } });
}

describe('several control-plane URLs', () => {
  test('an instance that is down (connection refused) is passed over: the agent reaches the next one', async () => {
    const [down, up] = await instances(2);
    const downUrl = down!.connectUrl;
    await down!.close();
    const { agent, log } = agentOf([downUrl, up!.connectUrl], 0);
    const running = agent.run();
    const conn = await up!.connection(0);
    await conn.welcome();
    // The pong comes after the agent handled the welcome (and logged it).
    conn.send('ping', { request_id: 'sync' });
    await conn.next('pong');
    expect(log.text).toContain(`"url":"${downUrl}"`);
    expect(log.text).toContain(`"next_url":"${up!.connectUrl}"`);
    expect(log.text).toMatch(new RegExp(`"url":"${up!.connectUrl}".*"msg":"connected to the control plane"`));
    await agent.shutdown('test');
    expect(await running).toEqual({ code: 0 });
  });

  test('an instance that refuses the upgrade (HTTP 503) is passed over too', async () => {
    const [refusing, up] = await instances(2);
    refusing!.refuseWith = 503;
    const { agent } = agentOf([refusing!.connectUrl, up!.connectUrl], 0);
    const running = agent.run();
    await (await up!.connection(0)).welcome();
    expect(refusing!.connections).toHaveLength(0);
    await agent.shutdown('test');
    expect(await running).toEqual({ code: 0 });
  });

  test('a lost session moves to the next instance, round the list', async () => {
    const [a, b, c] = await instances(3);
    const { agent } = agentOf([a!.connectUrl, b!.connectUrl, c!.connectUrl], 0);
    const running = agent.run();
    const onA = await a!.connection(0);
    await onA.welcome();
    onA.ws.terminate();
    const onB = await b!.connection(0);
    await onB.welcome();
    // A clean close of the instance (a graceful restart: 1001 going away) moves on as well.
    onB.ws.close(1001, 'server shutting down');
    const onC = await c!.connection(0);
    expect((await onC.welcome()).payload.running_jobs).toEqual([]);
    onC.ws.terminate();
    await (await a!.connection(1)).welcome();
    expect([a!.connections.length, b!.connections.length, c!.connections.length]).toEqual([2, 1, 1]);
    await agent.shutdown('test');
    expect(await running).toEqual({ code: 0 });
  });

  test('the backoff between instances is the same, still capped at a quarter of the lease', async () => {
    const [a, b] = await instances(2);
    // A backoff of a minute would outlast the lease: the cap (400 ms / 4) applies on the way to the next instance too.
    const { agent, log } = agentOf([a!.connectUrl, b!.connectUrl], 0, { reconnectBaseMs: 60_000, reconnectMaxMs: 60_000 });
    const running = agent.run();
    const onA = await a!.connection(0);
    await onA.welcome({ lease_ms: 400 });
    onA.ws.terminate();
    await (await b!.connection(0)).welcome();
    expect(log.text).toContain(`"url":"${a!.connectUrl}","code":1006,"reason":"","retry_in_ms":100,"next_url":"${b!.connectUrl}"`);
    await agent.shutdown('test');
    await running;
  });

  test('the first dial goes to the URL the random draw picks, so that agents spread over the instances', async () => {
    const [a, b, c] = await instances(3);
    const { agent } = agentOf([a!.connectUrl, b!.connectUrl, c!.connectUrl], 0.5);
    const running = agent.run();
    await (await b!.connection(0)).welcome();
    expect(a!.connections.length + c!.connections.length).toBe(0);
    await agent.shutdown('test');
    await running;
  });

  test('a terminal refusal (4401) from one instance ends the agent: the others are not tried', async () => {
    const [a, b] = await instances(2);
    const { agent, log } = agentOf([a!.connectUrl, b!.connectUrl], 0);
    const running = agent.run();
    const onA = await a!.connection(0);
    await onA.welcome();
    onA.ws.terminate();
    const onB = await b!.connection(0);
    await onB.welcome();
    onB.ws.close(CloseCodes.revoked, 'token revoked');
    expect(await running).toEqual({ code: 3, reason: expect.stringContaining('token unknown or revoked') });
    // Nothing dials again after the refusal: the run has ended, and with it the session's loop, the
    // only thing that dials; the one reconnect it scheduled was the one after A's socket dropped.
    expect([a!.connections.length, b!.connections.length]).toEqual([1, 1]);
    expect(log.text).toContain('not reconnecting');
    expect(log.text.split('disconnected from the control plane; reconnecting')).toHaveLength(2);
  });

  test('HTTP 401 on the upgrade from one instance is terminal as well', async () => {
    const [a, b] = await instances(2);
    a!.refuseWith = 401;
    const { agent } = agentOf([a!.connectUrl, b!.connectUrl], 0);
    expect(await agent.run()).toEqual({ code: 3, reason: 'HTTP 401' });
    expect(b!.connections).toHaveLength(0);
  });
});
