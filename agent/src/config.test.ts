import { DEFAULT_MULTI_STREAM } from './copy/multi-stream.js';
import { connectUrl, DEFAULT_DRAIN_TIMEOUT_MS, DEFAULT_MAX_JOBS, DEFAULT_OUTBOX_MEMORY_BYTES, parseAgentConfig, UsageError } from './config.js';

const TOKEN = 'agt_abcdefghijklmnopqrstuvwxyz012345';
const files: Record<string, string> = {};
const readFile = (path: string) => {
  if (!(path in files)) throw Object.assign(new Error('nope'), { code: 'ENOENT' });
  return files[path]!;
};
const parse = (args: string[], env: Record<string, string> = {}) => parseAgentConfig({ args, env, readFile });

describe('agent config', () => {
  test('flags, with defaults for the rest', () => {
    expect(parse(['--url', 'http://127.0.0.1:8080/api/v1', '--token', TOKEN])).toEqual({
      urls: ['http://127.0.0.1:8080/api/v1'], connectUrls: ['ws://127.0.0.1:8080/api/v1/agents/connect'], token: TOKEN,
      maxJobs: DEFAULT_MAX_JOBS, labels: [], logLevel: 'info', drainTimeoutMs: DEFAULT_DRAIN_TIMEOUT_MS, configFile: null,
      stateDir: null, outboxMemoryBytes: DEFAULT_OUTBOX_MEMORY_BYTES,
      // Closed by default: no local directory; no host list (the guard's default rules apply).
      allowRoots: [], allowHosts: [], denyHosts: [],
      // No metrics listener unless asked for; loopback when it is.
      metricsPort: null, metricsHost: '127.0.0.1',
      // No agent-wide bandwidth limit.
      bwlimit: null,
      multiStream: DEFAULT_MULTI_STREAM,
    });
  });

  test('several streams per large file: streams, cutoff and memory from flags, the environment or the file; bad values named', () => {
    const base = ['--url', 'http://127.0.0.1:8080', '--token', TOKEN];
    expect(parse([...base, '--multi-streams', '8', '--multi-stream-cutoff', '268435456']).multiStream)
      .toEqual({ ...DEFAULT_MULTI_STREAM, streams: 8, cutoffBytes: 268435456 });
    expect(parse(base, { XFER_AGENT_MULTI_STREAMS: '1' }).multiStream.streams).toBe(1);
    files['/etc/xfer/ms.json'] = JSON.stringify({ multi_stream_memory: 33554432 });
    expect(parse([...base, '--config', '/etc/xfer/ms.json']).multiStream.budgetBytes).toBe(33554432);
    expect(() => parse([...base, '--multi-streams', '0'])).toThrow(new UsageError('--multi-streams must be an integer from 1 to 64'));
    expect(() => parse(base, { XFER_AGENT_MULTI_STREAM_MEMORY: '1024' })).toThrow(/^XFER_AGENT_MULTI_STREAM_MEMORY must be an integer from 4194304/);
  });

  test('--bwlimit and --bwlimit-tz: the rclone syntax, checked at start with the flag named', () => {
    const base = ['--url', 'http://127.0.0.1:8080', '--token', TOKEN];
    const flag = parse([...base, '--bwlimit', '08:00,10M 19:00,off', '--bwlimit-tz', 'Europe/Berlin']).bwlimit!;
    expect(flag.spec).toBe('08:00,10M 19:00,off');
    expect(flag.tz).toBe('Europe/Berlin');
    // 12:00 in Berlin (winter, UTC+1) is 11:00 UTC: the 08:00 entry holds.
    expect(flag.rateAt(Date.parse('2026-01-14T11:00:00Z'))).toBe(10 * 1024 * 1024);
    expect(flag.rateAt(Date.parse('2026-01-14T19:00:00Z'))).toBeNull();
    expect(parse(base, { XFER_AGENT_BWLIMIT: '512k' }).bwlimit!.rateAt(0)).toBe(512 * 1024);
    files['/etc/xfer/bw.json'] = JSON.stringify({ bwlimit: '1M', bwlimit_tz: 'UTC' });
    expect(parse([...base, '--config', '/etc/xfer/bw.json']).bwlimit).toMatchObject({ spec: '1M', tz: 'UTC' });
    expect(() => parse([...base, '--bwlimit', '08:00,10X'])).toThrow(/^--bwlimit: invalid bandwidth "10X"/);
    expect(() => parse(base, { XFER_AGENT_BWLIMIT: '25:00,1M' })).toThrow(/^XFER_AGENT_BWLIMIT: invalid time "25:00"/);
    expect(() => parse([...base, '--bwlimit', '1M', '--bwlimit-tz', 'Mars/Olympus'])).toThrow(/--bwlimit-tz .* is not a known IANA time zone: "Mars\/Olympus"/);
    expect(() => parse([...base, '--bwlimit-tz', 'UTC'])).toThrow(new UsageError('--bwlimit-tz needs --bwlimit'));
  });

  test('--metrics-port and --metrics-host, from flags, the environment or the file', () => {
    const base = ['--url', 'http://127.0.0.1:8080', '--token', TOKEN];
    expect(parse([...base, '--metrics-port', '9465'])).toMatchObject({ metricsPort: 9465, metricsHost: '127.0.0.1' });
    expect(parse(base, { XFER_AGENT_METRICS_PORT: '9466', XFER_AGENT_METRICS_HOST: '0.0.0.0' })).toMatchObject({ metricsPort: 9466, metricsHost: '0.0.0.0' });
    files['/etc/xfer/metrics.json'] = JSON.stringify({ metrics_port: 9467 });
    expect(parse([...base, '--config', '/etc/xfer/metrics.json'])).toMatchObject({ metricsPort: 9467 });
    expect(() => parse([...base, '--metrics-port', '70000'])).toThrow(new UsageError('--metrics-port must be an integer from 0 to 65535'));
    expect(() => parse([...base, '--metrics-host', '0.0.0.0'])).toThrow(new UsageError('--metrics-host needs --metrics-port'));
  });

  test('--label: repeatable or comma-separated, from flags, the environment or the file; each a valid label, 32 at most', () => {
    const base = ['--url', 'http://h', '--token', TOKEN];
    expect(parse([...base, '--label', 'eu-west', '--label', 'dc=fra1,gpu', '--label', 'eu-west']).labels).toEqual(['eu-west', 'dc=fra1', 'gpu']);
    expect(parse(base, { XFER_AGENT_LABELS: 'a, b' }).labels).toEqual(['a', 'b']);
    files['/etc/xfer/labels.json'] = JSON.stringify({ labels: ['pool-1', 'zone:b'] });
    expect(parse([...base, '--config', '/etc/xfer/labels.json']).labels).toEqual(['pool-1', 'zone:b']);
    expect(parse([...base, '--config', '/etc/xfer/labels.json', '--label', 'only']).labels).toEqual(['only']);
    expect(() => parse([...base, '--label=-bad'])).toThrow(new UsageError('labels are letters, digits and . _ : / = - (starting with a letter or digit, 64 at most), not "-bad" (--label, XFER_AGENT_LABELS or "labels")'));
    expect(() => parse([...base, '--label', 'x'.repeat(65)])).toThrow(/64 at most/);
    expect(() => parse(base, { XFER_AGENT_LABELS: Array.from({ length: 33 }, (_, i) => `l${i}`).join(',') })).toThrow(new UsageError('at most 32 labels (--label, XFER_AGENT_LABELS or "labels")'));
  });

  test('flags beat the environment, which beats the config file', () => {
    files['/etc/xfer/agent.json'] = JSON.stringify({ url: 'https://file.example/api/v1', token: TOKEN, max_jobs: 2, log_level: 'warn', drain_timeout_ms: 5000 });
    const env = { XFER_AGENT_CONFIG: '/etc/xfer/agent.json', XFER_AGENT_MAX_JOBS: '7', XFER_LOG_LEVEL: 'debug' };
    const config = parse(['--log-level', 'error'], env);
    expect(config).toMatchObject({
      urls: ['https://file.example/api/v1'], connectUrls: ['wss://file.example/api/v1/agents/connect'],
      maxJobs: 7, logLevel: 'error', drainTimeoutMs: 5000, configFile: '/etc/xfer/agent.json',
    });
    expect(parse(['--config', '/etc/xfer/agent.json', '--max-jobs', '9']).maxJobs).toBe(9);
  });

  test('state directory: XDG default, or as given (absolute); outbox memory bound', () => {
    const base = ['--url', 'http://h', '--token', TOKEN];
    expect(parse(base, { HOME: '/home/a' }).stateDir).toBe('/home/a/.local/state/xfer-agent');
    expect(parse(base, { HOME: '/home/a', XDG_STATE_HOME: '/var/state' }).stateDir).toBe('/var/state/xfer-agent');
    expect(parse([...base, '--state-dir', '/srv/xfer'], { HOME: '/home/a' }).stateDir).toBe('/srv/xfer');
    expect(parse(base, { XFER_AGENT_OUTBOX_MEMORY_BYTES: '65536' }).outboxMemoryBytes).toBe(65536);
    expect(() => parse([...base, '--state-dir', 'rel/dir'])).toThrow(/state directory must be an absolute path/);
    expect(() => parse([...base, '--outbox-memory-bytes', '10'])).toThrow(/--outbox-memory-bytes must be an integer from 1024/);
  });

  test('every problem is a usage error naming the setting', () => {
    const bad: [string[], Record<string, string>, RegExp][] = [
      [[], {}, /URL is required/],
      [['--url', 'http://h'], {}, /token is required/],
      [['--url', 'http://h', '--token', 'svc_nope'], {}, /agt_/],
      [['--url', 'http://h', '--token', TOKEN, '--max-jobs', '0'], {}, /--max-jobs must be an integer from 1 to 1000/],
      [['--url', 'http://h', '--token', TOKEN], { XFER_AGENT_MAX_JOBS: 'lots' }, /XFER_AGENT_MAX_JOBS must be an integer/],
      [['--url', 'http://h', '--token', TOKEN, '--log-level', 'loud'], {}, /log level must be one of/],
      [['--url', 'ftp://h', '--token', TOKEN], {}, /http\(s\):\/\/ or ws\(s\):\/\//],
      [['--url', 'http://h', '--token', TOKEN, '--bogus'], {}, /Unknown option '--bogus'/],
      [['--config', '/missing.json'], {}, /cannot read the config file \/missing.json: ENOENT/],
    ];
    for (const [args, env, message] of bad) {
      expect(() => parse(args, env)).toThrow(UsageError);
      expect(() => parse(args, env)).toThrow(message);
    }
    files['/bad.json'] = '{"url": "http://h", "tokn": "x"}';
    expect(() => parse(['--config', '/bad.json'])).toThrow(/unknown key "tokn"/);
    files['/notjson.json'] = 'url=http://h';
    expect(() => parse(['--config', '/notjson.json'])).toThrow(/not valid JSON/);
  });

  test('allowed roots and host lists: comma-separated in flags and variables, arrays in the file, first source wins whole', () => {
    const base = ['--url', 'http://h', '--token', TOKEN];
    expect(parse([...base, '--allow-roots', '/srv/data, /mnt/nfs', '--allow-hosts', '10.0.0.0/8,files.example.com', '--deny-hosts', '*.corp.example'])).toMatchObject({
      allowRoots: ['/srv/data', '/mnt/nfs'], allowHosts: ['10.0.0.0/8', 'files.example.com'], denyHosts: ['*.corp.example'],
    });
    files['/lists.json'] = JSON.stringify({ url: 'http://h', token: TOKEN, allow_roots: ['/data'], allow_hosts: ['fd00::/8'], deny_hosts: '192.168.0.0/16' });
    expect(parse(['--config', '/lists.json'])).toMatchObject({ allowRoots: ['/data'], allowHosts: ['fd00::/8'], denyHosts: ['192.168.0.0/16'] });
    expect(parse(['--config', '/lists.json'], { XFER_AGENT_ALLOW_ROOTS: '/other' }).allowRoots).toEqual(['/other']);
    expect(parse(['--config', '/lists.json', '--allow-roots', '/flag'], { XFER_AGENT_ALLOW_ROOTS: '/other' }).allowRoots).toEqual(['/flag']);

    const bad: [string[], Record<string, string>, RegExp][] = [
      [['--allow-roots', 'relative/dir'], {}, /allowed roots must be absolute directories, not "relative\/dir" \(--allow-roots/],
      [['--allow-hosts', '10.0.0.0/33'], {}, /--allow-hosts .*"10.0.0.0\/33" is not an IP address, CIDR range, host name or \*.domain/],
      [[], { XFER_AGENT_DENY_HOSTS: 'bad host!' }, /XFER_AGENT_DENY_HOSTS .*"bad host!" is not/],
    ];
    for (const [args, env, message] of bad) expect(() => parse([...base, ...args], env)).toThrow(message);
    files['/badlist.json'] = JSON.stringify({ url: 'http://h', token: TOKEN, allow_roots: [1] });
    expect(() => parse(['--config', '/badlist.json'])).toThrow(/allow_roots in \/badlist.json must be a list of strings/);
  });

  test('several control-plane URLs: --url repeated or comma-separated, a comma-separated variable, a string or an array in the file; each normalized', () => {
    const urls = (args: string[], env: Record<string, string> = {}) => parse([...args, '--token', TOKEN], env).connectUrls;
    expect(urls(['--url', 'http://cp-1:8080/api/v1', '--url', 'https://cp-2', '--url', 'wss://cp-3/api/v1/agents/connect'])).toEqual([
      'ws://cp-1:8080/api/v1/agents/connect', 'wss://cp-2/api/v1/agents/connect', 'wss://cp-3/api/v1/agents/connect',
    ]);
    expect(urls(['--url', 'http://cp-1/api/v1, http://cp-2/api/v1', '--url', 'http://cp-3/api/v1'])).toEqual([
      'ws://cp-1/api/v1/agents/connect', 'ws://cp-2/api/v1/agents/connect', 'ws://cp-3/api/v1/agents/connect',
    ]);
    expect(urls([], { XFER_AGENT_URL: 'https://cp-1/api/v1,https://cp-2/api/v1' })).toEqual(['wss://cp-1/api/v1/agents/connect', 'wss://cp-2/api/v1/agents/connect']);
    files['/urls.json'] = JSON.stringify({ url: ['https://cp-1/api/v1', 'https://cp-2/api/v1'] });
    expect(parse(['--config', '/urls.json', '--token', TOKEN])).toMatchObject({
      urls: ['https://cp-1/api/v1', 'https://cp-2/api/v1'], connectUrls: ['wss://cp-1/api/v1/agents/connect', 'wss://cp-2/api/v1/agents/connect'],
    });
    files['/url.json'] = JSON.stringify({ url: 'https://cp-1/api/v1, https://cp-2/api/v1' });
    expect(parse(['--config', '/url.json', '--token', TOKEN]).connectUrls).toHaveLength(2);
    // The first source that sets the list wins whole: a flag replaces the variable and the file.
    expect(urls(['--config', '/urls.json', '--url', 'https://only'], { XFER_AGENT_URL: 'https://env' })).toEqual(['wss://only/api/v1/agents/connect']);
    expect(urls(['--config', '/urls.json'], { XFER_AGENT_URL: 'https://env' })).toEqual(['wss://env/api/v1/agents/connect']);
    // One instance written twice is dialed once; the first spelling is kept.
    expect(parse(['--url', 'http://cp-1/api/v1', '--url', 'ws://cp-1/api/v1/agents/connect', '--url', 'http://cp-1', '--token', TOKEN])).toMatchObject({
      urls: ['http://cp-1/api/v1'], connectUrls: ['ws://cp-1/api/v1/agents/connect'],
    });

    const bad: [string[], Record<string, string>, RegExp][] = [
      [['--url', 'http://cp-1', '--url', 'ftp://cp-2'], {}, /must be http\(s\):\/\/ or ws\(s\):\/\/, not ftp:/],
      [[], { XFER_AGENT_URL: 'http://cp-1,not a url' }, /not a URL: "not a url"/],
      [['--url', 'https://u:p@cp-2'], {}, /must not carry credentials/],
      [['--url', ' , '], {}, /URL is required/],
    ];
    for (const [args, env, message] of bad) expect(() => parse([...args, '--token', TOKEN], env)).toThrow(message);
    files['/badurl.json'] = JSON.stringify({ url: [1, 2], token: TOKEN });
    expect(() => parse(['--config', '/badurl.json'])).toThrow(/url in \/badurl.json must be a list of strings/);
  });

  test('the connect URL is derived from the base URL however it is written', () => {
    expect(connectUrl('http://h:8080/api/v1')).toBe('ws://h:8080/api/v1/agents/connect');
    expect(connectUrl('https://h/api/v1/')).toBe('wss://h/api/v1/agents/connect');
    expect(connectUrl('https://h')).toBe('wss://h/api/v1/agents/connect');
    expect(connectUrl('https://h/prefix')).toBe('wss://h/prefix/api/v1/agents/connect');
    expect(connectUrl('wss://h/api/v1/agents/connect')).toBe('wss://h/api/v1/agents/connect');
    expect(() => connectUrl('https://user:pw@h/api/v1')).toThrow(/credentials/);
    expect(() => connectUrl('not a url')).toThrow(/not a URL/);
  });
});
