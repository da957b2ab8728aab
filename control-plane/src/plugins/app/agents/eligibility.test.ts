import { Types } from 'mongoose';
import { ConflictError, ServiceUnavailableError } from '../../../errors.js';
import type { RunConnection } from '../transfers/index.js';
import { chooseFor, chooseRun, effectiveSlots, isApproved, poolsOf, serves, type AgentFacts } from './eligibility.js';

const agent = (name: string, o: Partial<AgentFacts> = {}): AgentFacts => ({
  _id: new Types.ObjectId(), name, labels: [], agent_labels: [], connector_types: ['sftp', 's3'], relay: false, max_jobs: 4, job_limit: null, online: true, ...o,
});
const conn = (name: string, type: string, o: Partial<RunConnection> = {}): RunConnection => ({ id: String(new Types.ObjectId()), name, type, agent_id: null, agent_pool: null, ...o });

describe('eligibility', () => {
  test('pools join the account\'s labels and the operator\'s, each once', () => {
    expect(poolsOf({ labels: ['a', 'b'], agent_labels: ['b', 'c'] })).toEqual(['a', 'b', 'c']);
    expect(poolsOf({ labels: [], agent_labels: null })).toEqual([]);
  });

  test('effective slots: the account\'s cap bounded by the agent\'s own; 0 before a hello', () => {
    expect(effectiveSlots({ max_jobs: 4, job_limit: null })).toBe(4);
    expect(effectiveSlots({ max_jobs: 4, job_limit: 2 })).toBe(2);
    expect(effectiveSlots({ max_jobs: 4, job_limit: 10 })).toBe(4);
    expect(effectiveSlots({ max_jobs: null, job_limit: 3 })).toBe(0);
  });

  test('an agent serves a connection naming it, its pool, or neither; with the connector', () => {
    const x = agent('x', { labels: ['p'], connector_types: ['sftp'] });
    expect(serves(x, conn('any', 'sftp'))).toBe(true);
    expect(serves(x, conn('s3', 's3'))).toBe(false);
    expect(serves(x, conn('pinned', 'sftp', { agent_id: String(x._id) }))).toBe(true);
    expect(serves(x, conn('other', 'sftp', { agent_id: String(new Types.ObjectId()) }))).toBe(false);
    expect(serves(x, conn('pool', 'sftp', { agent_pool: 'p' }))).toBe(true);
    expect(serves(x, conn('pool', 'sftp', { agent_pool: 'q' }))).toBe(false);
    expect(serves({ ...x, labels: [], agent_labels: ['q'] }, conn('pool', 'sftp', { agent_pool: 'q' }))).toBe(true);
  });

  test('direct whenever an online agent serves both, even when a relay pair exists; else relay; offline agents never count', () => {
    const both = agent('both', { relay: true });
    const src = agent('src', { connector_types: ['sftp'], relay: true });
    const dst = agent('dst', { connector_types: ['s3'], relay: true });
    const [a, b] = [conn('a', 'sftp'), conn('b', 's3')];
    expect(chooseRun(a, b, [both, src, dst], true)).toEqual({ mode: 'direct', agents: [both] });
    expect(chooseRun(a, b, [{ ...both, online: false }, src, dst], true)).toMatchObject({ mode: 'relay', sources: [src], destinations: [dst] });
    // Relay-capable on both sides, and relays available: all three are needed.
    expect(chooseRun(a, b, [src, { ...dst, relay: false }], true).mode).toBeNull();
    expect(chooseRun(a, b, [src, dst], false).mode).toBeNull();
  });

  test('why not: 503 for what an agent coming online changes, 409 for two pinned agents without relays', () => {
    const x = agent('x', { connector_types: ['sftp'] });
    const y = agent('y', { connector_types: ['s3'] });
    const pinnedX = conn('a', 'sftp', { agent_id: String(x._id) });
    const pinnedY = conn('b', 's3', { agent_id: String(y._id) });
    const refusal = (c: ReturnType<typeof chooseRun>) => (c.mode === null ? c.problem : null);
    const twoAgents = refusal(chooseRun(pinnedX, pinnedY, [x, y], false));
    expect(twoAgents).toBeInstanceOf(ConflictError);
    expect(twoAgents!.message).toBe("Connection 'a' is served by agent 'x' and connection 'b' by agent 'y': no agent serves both ends and relays are unavailable; let one agent serve both (agent_id or agent_pool)");
    expect(refusal(chooseRun(pinnedX, conn('b', 's3'), [{ ...x, online: false }, y], true))!.message).toBe("Agent 'x', which serves connection 'a', is offline");
    expect(refusal(chooseRun(conn('a', 'sftp', { agent_pool: 'p' }), conn('b', 's3'), [x, y], true))).toBeInstanceOf(ServiceUnavailableError);
    expect(refusal(chooseRun(conn('a', 'sftp', { agent_pool: 'p' }), conn('b', 's3'), [x, y], true))!.message).toBe("No online agent of pool 'p' can serve connection 'a' (needs sftp connector)");
    expect(refusal(chooseRun(conn('a', 'sftp'), conn('b', 'webdav'), [x, y], false))!.message).toBe("No online agent can serve connections 'a' and 'b' (needs sftp and webdav connectors)");
    expect(refusal(chooseRun(conn('a', 'sftp', { agent_id: String(new Types.ObjectId()) }), conn('b', 's3'), [x, y], true))!.message).toMatch(/^Connection 'a' is served by agent [0-9a-f]{24}, which no longer exists$/);
  });

  test('a connection test: the online agents serving it, or why there are none', () => {
    const x = agent('x', { labels: ['p'] });
    expect(chooseFor(conn('a', 'sftp', { agent_pool: 'p' }), [x, agent('y')])).toEqual([x]);
    expect((chooseFor(conn('a', 'sftp', { agent_pool: 'p' }), [{ ...x, online: false }]) as Error).message).toBe("No online agent of pool 'p' can serve connection 'a' (needs sftp connector)");
  });

  test('a pending agent serves only connections pinned to it, belongs to no pool, and is named when work waits for it; one stored before approval counts as approved', () => {
    const pending = agent('p', { labels: ['fra1'], agent_labels: ['gpu'], approved: false });
    expect(isApproved(pending)).toBe(false);
    expect(isApproved(agent('old', { approved: undefined }))).toBe(true);
    expect(isApproved(agent('old', { approved: null }))).toBe(true);
    expect(poolsOf(pending)).toEqual([]);
    expect(poolsOf({ ...pending, approved: true })).toEqual(['fra1', 'gpu']);
    expect(serves(pending, conn('any', 'sftp'))).toBe(false);
    expect(serves(pending, conn('pool', 'sftp', { agent_pool: 'fra1' }))).toBe(false);
    expect(serves(pending, conn('pinned', 'sftp', { agent_id: String(pending._id) }))).toBe(true);
    expect(serves(agent('old', { approved: undefined }), conn('any', 'sftp'))).toBe(true);

    const refusal = chooseRun(conn('a', 'sftp'), conn('b', 's3'), [pending, agent('big', { approved: false, connector_types: ['sftp'] })], true);
    expect(refusal.mode === null && refusal.problem.message).toBe("No online agent can serve connections 'a' and 'b' (needs sftp and s3 connectors); pending approval (POST /agents/:id/approve): 'p'");
    expect((chooseFor(conn('a', 'sftp', { agent_pool: 'gpu' }), [pending]) as Error).message)
      .toBe("No online agent of pool 'gpu' can serve connection 'a' (needs sftp connector); pending approval (POST /agents/:id/approve): 'p'");
    const approved = agent('ok');
    expect(chooseRun(conn('a', 'sftp'), conn('b', 's3'), [pending, approved], true)).toEqual({ mode: 'direct', agents: [approved] });
  });
});
