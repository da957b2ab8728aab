import { ConfigError, parseConfig } from './config.js';

describe('agent and dispatch settings', () => {
  test('defaults', () => {
    expect(parseConfig({})).toMatchObject({
      agentHeartbeatMs: 10_000, agentHelloTimeoutMs: 5_000, jobLeaseMs: 30_000, dispatchPollMs: 500, agentRequestTimeoutMs: 30_000,
    });
  });

  test('read from the environment', () => {
    const config = parseConfig({
      XFER_AGENT_HEARTBEAT_MS: '500', XFER_AGENT_HELLO_TIMEOUT_MS: '2000', XFER_JOB_LEASE_MS: '4000',
      XFER_DISPATCH_POLL_MS: '100', XFER_AGENT_REQUEST_TIMEOUT_MS: '1500',
    });
    expect(config).toMatchObject({ agentHeartbeatMs: 500, agentHelloTimeoutMs: 2000, jobLeaseMs: 4000, dispatchPollMs: 100, agentRequestTimeoutMs: 1500 });
  });

  test('a lease shorter than two heartbeats, or a bad number, stops the start naming the variable', () => {
    expect(() => parseConfig({ XFER_AGENT_HEARTBEAT_MS: '20000', XFER_JOB_LEASE_MS: '30000' }))
      .toThrow(new ConfigError('XFER_JOB_LEASE_MS must be at least twice XFER_AGENT_HEARTBEAT_MS'));
    expect(() => parseConfig({ XFER_DISPATCH_POLL_MS: 'soon' })).toThrow(/^XFER_DISPATCH_POLL_MS must be an integer/);
  });
});
