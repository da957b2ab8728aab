import type { ConnectionSettings, ConnectionType, PayloadOf, ServerToAgent } from '@xfer/shared';
import { Agent, type AgentOptions } from '../../src/agent.js';
import type { Connector } from '../../src/connectors/types.js';
import type { ConnectorSource } from '../../src/lib/connector-source.js';
import { createLogger } from '../../src/logger.js';
import { fsConnector, FAST_RETRIES } from './tree.js';

export const TEST_TOKEN = 'agt_test-token-0123456789abcdef';

/** Log lines the agent wrote (JSON), to check what is and is not logged. */
export class LogLines {
  readonly lines: string[] = [];
  write(line: string): void {
    this.lines.push(line);
  }
  get text(): string {
    return this.lines.join('');
  }
}

/**
 * Connectors for tests: every connection's `path` is a directory of this host, served by the fs
 * connector whatever the connection type says; `wrap` may put a test wrapper around it.
 */
export function fsConnectors(wrap?: (c: Connector, settings: ConnectionSettings) => Connector): ConnectorSource {
  return {
    types: (): ConnectionType[] => ['nfs', 'sftp'],
    create: (settings) => {
      const connector = fsConnector(settings.path);
      return wrap ? wrap(connector, settings) : connector;
    },
  };
}

export function settings(path: string, type: ConnectionType = 'nfs'): ConnectionSettings {
  return { id: 'c'.repeat(24), name: `dir ${path}`, type, host: 'localhost', port: 2049, path, options: {}, agent_id: null, credentials: {} };
}

export function assignPayload(jobId: string, sourceDir: string, destinationDir: string, overrides: Partial<PayloadOf<typeof ServerToAgent, 'job.assign'>> = {}): PayloadOf<typeof ServerToAgent, 'job.assign'> {
  return {
    job_id: jobId, attempt: 1, source: settings(sourceDir), source_path: '/', destination: settings(destinationDir), destination_path: '/',
    options: { overwrite: 'if_changed', verify: 'checksum', concurrency: 2 }, resume: false, ...overrides,
  };
}

/** An agent with short timings, a captured log, and fs-backed connectors. */
export function testAgent(url: AgentOptions['url'], overrides: Partial<AgentOptions> = {}): { agent: Agent; log: LogLines } {
  const log = new LogLines();
  const agent = new Agent({
    url, token: TEST_TOKEN, version: '0.1.0-test', hostname: 'test-host', maxJobs: 2, drainTimeoutMs: 30_000,
    log: createLogger('debug', log), connectors: fsConnectors(),
    session: { reconnectBaseMs: 20, reconnectMaxMs: 100, handshakeTimeoutMs: 5000 },
    progress: { intervalMs: 50 }, tuning: FAST_RETRIES,
    ...overrides,
  });
  return { agent, log };
}

/** A promise with its resolve function outside, for gates in tests. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
}
