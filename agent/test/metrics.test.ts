import { ConnectorError, type Connector } from '../src/connectors/types.js';
import { AgentMetrics } from '../src/metrics/agent-metrics.js';
import { listenMetrics, type MetricsListener } from '@xfer/shared/metrics-listener';
import { assignPayload, deferred, fsConnectors, testAgent } from './helpers/test-agent.js';
import { TestControlPlane } from './helpers/test-control-plane.js';
import { rmTemp, tempDir, writeTree } from './helpers/tree.js';
import { WrappedConnector } from './helpers/wrapped-connector.js';

/** The agent's /metrics (`--metrics-port`) over real jobs run against the test control plane. */
let server: TestControlPlane;
let endpoint: MetricsListener;
let metrics: AgentMetrics;
let src: string;
let dst: string;
beforeEach(async () => {
  server = await TestControlPlane.start();
  metrics = new AgentMetrics();
  endpoint = await listenMetrics(metrics, { host: '127.0.0.1', port: 0, onError: (err) => { throw err; } });
  src = tempDir('xfer-msrc-');
  dst = tempDir('xfer-mdst-');
});
afterEach(async () => {
  await endpoint.close();
  await server.close();
  rmTemp(src);
  rmTemp(dst);
});

const scrape = async () => {
  const res = await fetch(`http://127.0.0.1:${endpoint.address.port}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
};
/** `name{labels} value` as written by prom-client (labels in declaration order). */
const value = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

test('jobs running, ended, bytes, files and failures by connector type move with real jobs', async () => {
  writeTree(src, { 'a.txt': 'aaaa', 'b.txt': 'bbbbbb', 'bad.txt': 'x' });
  const gate = deferred();
  const started = deferred();
  let failBad = false;
  const connectors = fsConnectors((inner, s) => {
    if (s.path !== dst) return inner;
    const w = new WrappedConnector(inner);
    w.beforeWrite = async (path) => {
      started.resolve();
      await gate.promise;
      if (failBad && path.includes('bad.txt')) throw new ConnectorError('PERMISSION', 'bad.txt: permission denied');
    };
    return w as Connector;
  });
  const { agent } = testAgent(server.connectUrl, { connectors, metrics });
  const running = agent.run();
  const conn = await server.connection(0);
  await conn.welcome();
  expect(value(await scrape(), 'xfer_agent_jobs_running')).toBe(0);

  conn.send('job.assign', assignPayload('job-1', src, dst, { destination_path: '/one' }));
  await started.promise;
  expect(value(await scrape(), 'xfer_agent_jobs_running')).toBe(1);
  gate.resolve();
  await conn.next('job.completed');
  const after = await scrape();
  expect(value(after, 'xfer_agent_jobs_running')).toBe(0);
  expect(value(after, 'xfer_agent_jobs_finished_total{status="completed"}')).toBe(1);
  expect(value(after, 'xfer_agent_bytes_total{source="nfs",destination="nfs"}')).toBe(11);
  expect(value(after, 'xfer_agent_files_total{source="nfs",destination="nfs",outcome="transferred"}')).toBe(3);

  failBad = true;
  conn.send('job.assign', assignPayload('job-2', src, dst, { destination_path: '/two' }));
  await conn.next('job.failed');
  const failed = await scrape();
  expect(value(failed, 'xfer_agent_jobs_finished_total{status="failed"}')).toBe(1);
  expect(value(failed, 'xfer_agent_job_errors_total{source="nfs",destination="nfs"}')).toBe(1);
  expect(value(failed, 'xfer_agent_files_total{source="nfs",destination="nfs",outcome="failed"}')).toBe(1);
  expect(value(failed, 'xfer_agent_bytes_total{source="nfs",destination="nfs"}')).toBe(21);
  expect(failed).toContain('process_resident_memory_bytes');
  // Labels are connector types and statuses: no job id, path or token.
  for (const raw of ['job-1', 'job-2', src, dst, 'agt_']) expect(failed).not.toContain(raw);

  await agent.shutdown('test');
  await running;
});

test('only GET /metrics is served', async () => {
  const base = `http://127.0.0.1:${endpoint.address.port}`;
  expect((await fetch(`${base}/`)).status).toBe(404);
  expect((await fetch(`${base}/metrics`, { method: 'POST' })).status).toBe(404);
  expect((await fetch(`${base}/metrics?x=1`)).status).toBe(200);
});
