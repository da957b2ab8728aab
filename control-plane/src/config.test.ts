import { hostname } from 'node:os';
import { advertisedUrl, ConfigError, fastifyTrustProxy, parseConfig } from './config.js';

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

  test('XFER_JOB_ORPHAN_TIMEOUT: 10 minutes by default; milliseconds or a number with a unit; XFER_JOB_MAX_TAKEOVERS: 5 by default, 0 turns takeovers off', () => {
    expect(parseConfig({})).toMatchObject({ jobOrphanTimeoutMs: 600_000, jobMaxTakeovers: 5 });
    for (const [raw, ms] of [['1500', 1500], ['250ms', 250], ['90s', 90_000], ['10m', 600_000], ['2h', 7_200_000]] as const) {
      expect(parseConfig({ XFER_JOB_ORPHAN_TIMEOUT: raw }).jobOrphanTimeoutMs).toBe(ms);
    }
    expect(parseConfig({ XFER_JOB_MAX_TAKEOVERS: '0' }).jobMaxTakeovers).toBe(0);
    for (const bad of ['soon', '10 m', '-5s', '1.5m', '50', '8d']) {
      expect(() => parseConfig({ XFER_JOB_ORPHAN_TIMEOUT: bad })).toThrow(/^XFER_JOB_ORPHAN_TIMEOUT must be a duration between 100 ms and 168 h/);
    }
    expect(() => parseConfig({ XFER_JOB_MAX_TAKEOVERS: '-1' })).toThrow(/^XFER_JOB_MAX_TAKEOVERS must be an integer between 0 and 1000/);
  });
});

describe('retry backoff of webhook deliveries and notification emails', () => {
  test('1 h longest wait by default; each settable, never below the first wait', () => {
    expect(parseConfig({}).webhooks).toMatchObject({ backoffBaseMs: 30_000, backoffMaxMs: 3600_000 });
    expect(parseConfig({ XFER_NOTIFY_BACKOFF_BASE_MS: '200', XFER_NOTIFY_BACKOFF_MAX_MS: '5000' }).notifications).toMatchObject({ backoffBaseMs: 200, backoffMaxMs: 5000 });
    expect(() => parseConfig({ XFER_WEBHOOK_BACKOFF_MAX_MS: '1000' }))
      .toThrow(new ConfigError('XFER_WEBHOOK_BACKOFF_MAX_MS must be at least XFER_WEBHOOK_BACKOFF_BASE_MS (30000)'));
    expect(() => parseConfig({ XFER_NOTIFY_BACKOFF_MAX_MS: 'soon' })).toThrow(/XFER_NOTIFY_BACKOFF_MAX_MS must be an integer/);
  });
});

describe('malware scanner settings', () => {
  test('clamd on the Debian socket by default, oversized files scanned in windows', () => {
    expect(parseConfig({}).scanner).toEqual({ kind: 'clamd', address: { path: '/var/run/clamav/clamd.ctl' }, timeoutMs: 120_000, oversize: 'windows' });
  });

  test('host:port, [v6]:port and XFER_SCAN_OVERSIZE=reject', () => {
    expect(parseConfig({ XFER_CLAMD: '127.0.0.1:3310', XFER_SCAN_OVERSIZE: 'reject' }).scanner)
      .toMatchObject({ address: { host: '127.0.0.1', port: 3310 }, oversize: 'reject' });
    expect(parseConfig({ XFER_CLAMD: '[::1]:3310' }).scanner).toMatchObject({ address: { host: '::1', port: 3310 } });
  });

  test('bad values stop the start naming the variable', () => {
    expect(() => parseConfig({ XFER_CLAMD: 'clamd' })).toThrow(/^XFER_CLAMD must be host:port or an absolute socket path/);
    expect(() => parseConfig({ XFER_SCAN_OVERSIZE: 'skip' })).toThrow(new ConfigError('XFER_SCAN_OVERSIZE must be windows or reject'));
    expect(() => parseConfig({ XFER_SCANNER: 'none', XFER_CLAMD: '127.0.0.1:3310' })).toThrow(/contradict/);
  });
});

describe('keys', () => {
  test('the session key is its own setting, separate from the master key; unset means the key kept in the database', () => {
    const key = Buffer.alloc(32, 7);
    const config = parseConfig({ XFER_MASTER_KEY: Buffer.alloc(32, 1).toString('base64'), XFER_SESSION_KEY: key.toString('hex') });
    expect(config.sessionKey).toEqual(key);
    expect(config.masterKeys).toEqual([Buffer.alloc(32, 1)]);
    expect(parseConfig({}).sessionKey).toBeNull();
    expect(() => parseConfig({ XFER_SESSION_KEY: 'short' })).toThrow(new ConfigError('XFER_SESSION_KEY must be 32 bytes, as 64 hex characters or base64'));
  });
});

describe('XFER_TRUST_PROXY', () => {
  test('unset, empty, false and 0 trust no proxy', () => {
    for (const raw of [undefined, '', 'false', '0']) expect(parseConfig({ XFER_TRUST_PROXY: raw }).trustProxy).toBe(false);
  });

  test('a hop count, or a list of addresses, CIDRs and proxy-addr range names', () => {
    expect(parseConfig({ XFER_TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(parseConfig({ XFER_TRUST_PROXY: '10.0.0.0/8, 192.0.2.7,fd00::/8 ,::1,loopback' }).trustProxy)
      .toEqual(['10.0.0.0/8', '192.0.2.7', 'fd00::/8', '::1', 'loopback']);
  });

  test('"everything" is refused with the reason; so are bad entries, naming them', () => {
    for (const raw of ['true', 'TRUE', 'all', '*']) expect(() => parseConfig({ XFER_TRUST_PROXY: raw })).toThrow(/would believe X-Forwarded-For from any client/);
    expect(() => parseConfig({ XFER_TRUST_PROXY: '17' })).toThrow(/hop count between 0 and 16/);
    for (const bad of ['10.0.0.0/33', 'proxy.example', '10.0.0.1/8/1', '::1/129', '1.2.3']) {
      expect(() => parseConfig({ XFER_TRUST_PROXY: `127.0.0.1,${bad}` })).toThrow(`XFER_TRUST_PROXY has "${bad}"`);
    }
  });

  test('a hop count trusts exactly that many addresses from the socket peer leftwards', () => {
    const trust = fastifyTrustProxy(2) as (address: string, hop: number) => boolean;
    expect([0, 1, 2].map((hop) => trust('192.0.2.1', hop))).toEqual([true, true, false]);
    expect(fastifyTrustProxy(false)).toBe(false);
  });
});

describe('metrics settings', () => {
  test('unset: not served; a port (bound to loopback unless a host is given), a token, or both', () => {
    expect(parseConfig({}).metrics).toEqual({ port: null, host: '127.0.0.1', token: null });
    expect(parseConfig({ XFER_METRICS_PORT: '9464' }).metrics).toEqual({ port: 9464, host: '127.0.0.1', token: null });
    expect(parseConfig({ XFER_METRICS_PORT: '9464', XFER_METRICS_HOST: '0.0.0.0', XFER_METRICS_TOKEN: 'a'.repeat(32) }).metrics)
      .toEqual({ port: 9464, host: '0.0.0.0', token: 'a'.repeat(32) });
    expect(parseConfig({ XFER_METRICS_TOKEN: 'b'.repeat(16) }).metrics).toEqual({ port: null, host: '127.0.0.1', token: 'b'.repeat(16) });
  });

  test('a short token, a bad port, or a host without a port stops the start naming the variable', () => {
    expect(() => parseConfig({ XFER_METRICS_TOKEN: 'short' })).toThrow(new ConfigError('XFER_METRICS_TOKEN must be at least 16 characters without spaces'));
    expect(() => parseConfig({ XFER_METRICS_TOKEN: `${'c'.repeat(16)} d` })).toThrow(/XFER_METRICS_TOKEN/);
    expect(() => parseConfig({ XFER_METRICS_PORT: '70000' })).toThrow(/XFER_METRICS_PORT must be an integer/);
    expect(() => parseConfig({ XFER_METRICS_HOST: '0.0.0.0' })).toThrow(new ConfigError('XFER_METRICS_HOST needs XFER_METRICS_PORT'));
  });
});

describe('XFER_INSTANCE_URL', () => {
  test('an http(s) base URL, without a trailing slash', () => {
    expect(parseConfig({}).instanceUrl).toBeNull();
    expect(parseConfig({ XFER_INSTANCE_URL: 'http://10.0.0.5:8080/' }).instanceUrl).toBe('http://10.0.0.5:8080');
    expect(parseConfig({ XFER_INSTANCE_URL: 'https://cp-2.internal/xfer/' }).instanceUrl).toBe('https://cp-2.internal/xfer');
    expect(() => parseConfig({ XFER_INSTANCE_URL: 'cp-2:8080' })).toThrow(/XFER_INSTANCE_URL must be an http/);
    expect(() => parseConfig({ XFER_INSTANCE_URL: 'ftp://cp-2' })).toThrow(/XFER_INSTANCE_URL must be an http/);
    expect(() => parseConfig({ XFER_INSTANCE_URL: 'http://u:p@cp-2' })).toThrow(new ConfigError('XFER_INSTANCE_URL must not carry credentials, a query or a fragment'));
  });

  test('unset, it is derived from the address the app listens on', () => {
    const derive = (address: string, family = 'IPv4') => advertisedUrl({ instanceUrl: null }, { address, family, port: 8080 });
    expect(derive('127.0.0.1')).toBe('http://127.0.0.1:8080');
    expect(derive('::1', 'IPv6')).toBe('http://[::1]:8080');
    expect(derive('0.0.0.0')).toBe(`http://${hostname()}:8080`);
    expect(derive('::', 'IPv6')).toBe(`http://${hostname()}:8080`);
    expect(advertisedUrl({ instanceUrl: null }, null)).toBeNull();
    expect(advertisedUrl({ instanceUrl: 'https://cp-1' }, null)).toBe('https://cp-1');
  });
});
