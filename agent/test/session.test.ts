import { AgentToServer, CloseCodes, encodeRelayChunk, frame, type AgentMessage } from '@xfer/shared';
import { createLogger } from '../src/logger.js';
import { AgentSession } from '../src/session/session.js';
import { LogLines, TEST_TOKEN, testAgent } from './helpers/test-agent.js';
import { TestControlPlane, type AgentConnection } from './helpers/test-control-plane.js';

const JOB = '0123456789abcdef01234567';

let server: TestControlPlane;
beforeEach(async () => {
  server = await TestControlPlane.start();
});
afterEach(async () => {
  await server.close();
});

describe('agent session', () => {
  test('dials with the bearer token, says hello, and answers ping after welcome', async () => {
    const { agent, log } = testAgent(server.connectUrl);
    const running = agent.run();
    const conn = await server.connection(0);
    expect(conn.headers.authorization).toBe(`Bearer ${TEST_TOKEN}`);
    const hello = await conn.welcome();
    expect(hello.payload).toEqual({ version: '0.1.0-test', hostname: 'test-host', connector_types: ['nfs', 'sftp'], running_jobs: [], max_jobs: 2, acks: true, relay: true, watch: true, settle: true, sync: true });
    conn.send('ping', { request_id: 'r-1' });
    expect((await conn.next('pong')).payload).toEqual({ request_id: 'r-1' });
    await agent.shutdown('test');
    expect(await conn.closed).toEqual({ code: 1000, reason: 'agent shutting down' });
    expect(await running).toEqual({ code: 0 });
    expect(conn.invalid).toEqual([]);
    expect(log.text).not.toContain(TEST_TOKEN);
  });

  test('an invalid server frame closes the session with 4400, and the agent reconnects after a backoff', async () => {
    const { agent } = testAgent(server.connectUrl);
    const running = agent.run();
    const first = await server.connection(0);
    await first.welcome();
    first.ws.send(JSON.stringify({ v: 1, type: 'job.assign', id: 'x', payload: { job_id: 'j' } }));
    expect(await first.closed).toMatchObject({ code: CloseCodes.protocolError, reason: expect.stringContaining('invalid job.assign payload') });
    const second = await server.connection(1);
    await second.welcome();
    await agent.shutdown('test');
    expect(await running).toEqual({ code: 0 });
  });

  test.each([
    ['a binary frame on a session whose welcome offered no relays', {}, (c: AgentConnection) => c.ws.send(encodeRelayChunk(JOB, 1, Buffer.from('tar')), { binary: true }), 'unexpected binary frame'],
    ['a relay message on a session whose welcome offered no relays', {}, (c: AgentConnection) => c.send('relay.end', { job_id: JOB, attempt: 1 }), 'relay.end on a session without relays'],
    ['a binary frame that is no relay frame, on a relay session', { relay: true }, (c: AgentConnection) => c.ws.send(Buffer.from('not a relay frame at all'), { binary: true }), 'binary frame is not a relay frame'],
  ])('%s is a protocol error (4400)', async (_name, welcome, send, reason) => {
    const { agent } = testAgent(server.connectUrl);
    const running = agent.run();
    const first = await server.connection(0);
    await first.welcome(welcome);
    send(first);
    expect(await first.closed).toMatchObject({ code: CloseCodes.protocolError, reason });
    await (await server.connection(1)).welcome();
    await agent.shutdown('test');
    await running;
  });

  test('on a relay session, relay frames and messages of relays that are not here are dropped; the session goes on', async () => {
    const { agent, log } = testAgent(server.connectUrl);
    const running = agent.run();
    const conn = await server.connection(0);
    await conn.welcome({ relay: true });
    conn.ws.send(encodeRelayChunk(JOB, 1, Buffer.from('tar bytes of no relay')), { binary: true });
    conn.send('relay.credit', { job_id: JOB, attempt: 1, entries: 5, bytes: 1024 });
    conn.send('relay.end', { job_id: JOB, attempt: 1, error: 'gone' });
    conn.send('ping', { request_id: 'still-here' });
    expect((await conn.next('pong')).payload).toEqual({ request_id: 'still-here' });
    expect(server.connections).toHaveLength(1);
    expect(log.text).toContain('relay bytes for no relay here: dropped');
    await agent.shutdown('test');
    await running;
  });

  test('a message before welcome is a protocol error', async () => {
    const { agent } = testAgent(server.connectUrl);
    const running = agent.run();
    const first = await server.connection(0);
    await first.next('hello');
    first.send('ping', { request_id: 'too-early' });
    expect(await first.closed).toMatchObject({ code: CloseCodes.protocolError, reason: 'expected welcome, got ping' });
    await (await server.connection(1)).welcome();
    await agent.shutdown('test');
    await running;
  });

  test.each([
    [CloseCodes.revoked, 'token unknown or revoked'],
    [CloseCodes.replaced, 'another session of this agent replaced this one'],
    [CloseCodes.unsupportedVersion, 'protocol version not supported'],
  ])('terminal close code %i stops the agent for good with exit code 3', async (code, words) => {
    const { agent, log } = testAgent(server.connectUrl);
    const running = agent.run();
    const conn = await server.connection(0);
    await conn.welcome();
    conn.ws.close(code, 'bye');
    const exit = await running;
    expect(exit).toEqual({ code: 3, reason: expect.stringContaining(words) });
    expect(server.connections).toHaveLength(1);
    expect(log.text).toContain('not reconnecting');
  });

  test('an HTTP 401 on the upgrade is terminal too', async () => {
    server.refuseWith = 401;
    const { agent } = testAgent(server.connectUrl);
    expect(await agent.run()).toEqual({ code: 3, reason: 'HTTP 401' });
  });

  test('reconnects with backoff after the server drops the connection, announcing running jobs again', async () => {
    const { agent, log } = testAgent(server.connectUrl);
    const running = agent.run();
    const first = await server.connection(0);
    await first.welcome();
    first.ws.terminate();
    const second = await server.connection(1);
    const hello = await second.welcome();
    expect(hello.payload.running_jobs).toEqual([]);
    expect(log.text).toMatch(/"retry_in_ms":\d+,"msg":"disconnected from the control plane; reconnecting"/);
    await agent.shutdown('test');
    await running;
  });

  test('a server silent for three heartbeats is dropped and redialed', async () => {
    const { agent, log } = testAgent(server.connectUrl);
    const running = agent.run();
    const first = await server.connection(0);
    // This server never pings: after 3 × 100 ms of silence the agent must give up on it.
    await first.welcome({ heartbeat_ms: 100 });
    expect((await first.closed).code).toBe(1006);
    await (await server.connection(1)).welcome();
    expect(log.text).toContain('control plane silent for 3 heartbeats');
    await agent.shutdown('test');
    await running;
  });
});

describe('session outbox', () => {
  test('terminal messages and the latest progress per job sent while disconnected go out after the next welcome; replies are dropped', async () => {
    const log = new LogLines();
    const session = new AgentSession({
      url: server.connectUrl, token: TEST_TOKEN, log: createLogger('debug', log),
      hello: () => ({ version: 't', hostname: 'h', connector_types: [], running_jobs: [], max_jobs: 1 }),
      onWelcome: () => {}, onMessage: () => {}, reconnectBaseMs: 10, reconnectMaxMs: 20,
    });
    const running = session.run();
    const first = await server.connection(0);
    await first.welcome();
    first.ws.terminate();
    const second = await server.connection(1);
    await second.next('hello');
    // Disconnected from the agent's point of view until the welcome below.
    const counters = { files_total: 10, files_transferred: 0, files_skipped: 0, files_failed: 0, bytes_transferred: 0 };
    const file = (path: string) => ({ path, status: 'copied' as const, size: 1 });
    const send = (m: AgentMessage) => session.send(m);
    send(frame(AgentToServer, 'job.progress', { job_id: 'j1', ...counters, files_transferred: 1, listing_done: false, files: [file('a')] }));
    send(frame(AgentToServer, 'pong', { request_id: 'lost' }));
    send(frame(AgentToServer, 'job.progress', { job_id: 'j1', ...counters, files_transferred: 2, listing_done: true, files: [file('b')] }));
    send(frame(AgentToServer, 'job.completed', { job_id: 'j1', ...counters, files_transferred: 2 }));
    send(frame(AgentToServer, 'job.failed', { job_id: 'j2', ...counters, error: 'boom' }));
    second.send('welcome', { agent_id: 'a'.repeat(24), heartbeat_ms: 30_000, lease_ms: 90_000, abort_jobs: [] });
    const progress = await second.next('job.progress');
    // One progress, the latest counters, with the file results of both.
    expect(progress.payload).toMatchObject({ job_id: 'j1', files_transferred: 2, listing_done: true, files: [file('a'), file('b')] });
    expect((await second.next('job.completed')).payload.job_id).toBe('j1');
    expect((await second.next('job.failed')).payload).toMatchObject({ job_id: 'j2', error: 'boom' });
    expect(await session.flushed(1000)).toBe(true);
    expect(second.received.map((m) => m.type)).toEqual(['hello', 'job.progress', 'job.completed', 'job.failed']);
    await session.stop();
    expect(await running).toEqual({ kind: 'stopped' });
  });
});
