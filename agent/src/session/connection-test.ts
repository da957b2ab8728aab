import type { AgentToServer, ConnectionSettings, PayloadOf } from '@xfer/shared';
import { reasonOf } from '../copy/errors.js';
import { truncate } from '../copy/stats.js';
import type { ConnectorSource } from '../lib/connector-source.js';
import type { Connector } from '../connectors/types.js';

export type ConnectionTestResult = Omit<PayloadOf<typeof AgentToServer, 'connection.test.result'>, 'request_id'>;

/**
 * Runs `connector.test()` for the settings, bounded by `timeoutMs` even when the connector does
 * not honour its signal, and says how it went. Never rejects; the message never holds credentials
 * (connectors do not put them in errors).
 */
export async function testConnection(connectors: ConnectorSource, settings: ConnectionSettings, timeoutMs: number): Promise<ConnectionTestResult> {
  const started = performance.now();
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let connector: Connector | undefined;
  try {
    connector = await connectors.create(settings);
    const test = connector.test({ signal: controller.signal });
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new Error(`no answer within ${Math.round(timeoutMs / 100) / 10} s`));
      }, timeoutMs);
    });
    test.catch(() => {}); // a late rejection after the timeout won
    const message = await Promise.race([test, timeout]);
    return { success: true, message: truncate(message, 2000), latency_ms: elapsed(started) };
  } catch (err) {
    return { success: false, message: truncate(reasonOf(err), 2000), latency_ms: elapsed(started) };
  } finally {
    clearTimeout(timer);
    await connector?.close().catch(() => {});
  }
}

function elapsed(started: number): number {
  return Math.round(performance.now() - started);
}
