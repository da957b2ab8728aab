import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import {
  AgentToServer, frame, parseMessage, ServerToAgent, type AgentToServerType, type PayloadOf, type PlanItem, type ServerMessage,
} from '@xfer/shared';
import { startStack, type Stack } from '../src/stack.js';
import { cliEnv, jsonOf, startCli, type CliRun } from './support/cli.js';

/**
 * `xfer sync` and `xfer transfers plan` as the built binary against a real xfer-server. The agent
 * is played here over the real agent protocol (shared/src/protocol/plan-protocol.ts): it answers
 * `plan.assign` with a known plan, and a job applying it pages the plan back with
 * `job.plan.query`, so what the CLI prints is checked against exactly what the agent said (the
 * agent's own planning is e2e/test/sync*.e2e.test.ts's).
 */
const run = randomBytes(4).toString('hex');
let stack: Stack;
let home: string;
let agent: PlayedAgent;
const names = { src: `sync src ${run}`, dst: `sync dst ${run}` };

const ITEMS: PlanItem[] = [
  { path: 'a.txt', action: 'copy', reason: 'new file', source: { size: 2048 } },
  { path: 'docs/b.txt', action: 'update', reason: 'size differs', source: { size: 100 }, destination: { size: 90 } },
  { path: 'docs/c.txt', action: 'skip', reason: 'same size and mtime', source: { size: 5 }, destination: { size: 5 } },
  { path: 'old/gone.txt', action: 'delete', reason: 'not in the source', destination: { size: 7 } },
];
const SUMMARY = { copy: 1, update: 1, delete: 1, skip: 1, copy_bytes: 2048, update_bytes: 100, delete_bytes: 7 };

/** An agent with `hello.sync` that plans ITEMS (in two batches) and applies a plan by paging it back. */
class PlayedAgent {
  readonly assigns: Array<PayloadOf<typeof ServerToAgent, 'plan.assign'>> = [];
  /** The items each applied job paged back, by job id. */
  readonly applied = new Map<string, PlanItem[]>();
  /** Frames that did not parse (none expected). */
  readonly errors: string[] = [];
  private constructor(private readonly ws: WebSocket) {}

  static async connect(url: string, token: string): Promise<PlayedAgent> {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/agents/connect`, { headers: { authorization: `Bearer ${token}` } });
    const played = new PlayedAgent(ws);
    const welcomed = new Promise<void>((resolve, reject) => {
      ws.on('message', (data) => {
        let message: ServerMessage;
        try {
          message = parseMessage(ServerToAgent, data as Buffer);
        } catch (err) {
          played.errors.push(`${(err as Error).message}: ${String(data).slice(0, 500)}`);
          return;
        }
        if (message.type === 'welcome') resolve();
        played.on(message);
      });
      ws.once('error', reject);
    });
    await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', reject); });
    played.send('hello', { version: '0.1.0-e2e', hostname: 'played', connector_types: ['sftp', 's3'], running_jobs: [], max_jobs: 2, sync: true });
    await welcomed;
    return played;
  }

  send<T extends AgentToServerType>(type: T, payload: PayloadOf<typeof AgentToServer, T>): void {
    this.ws.send(JSON.stringify(frame(AgentToServer, type, payload)));
  }

  private on(message: ServerMessage): void {
    if (message.type === 'ping') this.send('pong', { request_id: message.payload.request_id });
    if (message.type === 'plan.assign') {
      const { plan_id } = message.payload;
      this.assigns.push(message.payload);
      this.send('plan.items', { plan_id, seq: 1, items: ITEMS.slice(0, 2) });
      this.send('plan.items', { plan_id, seq: 2, items: ITEMS.slice(2) });
      this.send('plan.done', { plan_id, batches: 2, summary: SUMMARY, fingerprint: 'f'.repeat(64) });
    }
    if (message.type === 'job.assign') {
      const { job_id } = message.payload;
      this.send('job.accepted', { job_id });
      this.applied.set(job_id, []);
      this.send('job.plan.query', { job_id, request_id: `${job_id}-1`, limit: 3 });
    }
    if (message.type === 'job.plan.page') {
      const [jobId, n] = message.payload.request_id.split('-');
      const items = this.applied.get(jobId!)!;
      items.push(...message.payload.items);
      if (!message.payload.done) {
        this.send('job.plan.query', { job_id: jobId!, request_id: `${jobId}-${Number(n) + 1}`, limit: 3, after: items[items.length - 1]!.path });
        return;
      }
      const counters = { files_total: 3, files_transferred: 2, files_skipped: 1, files_failed: 0, bytes_transferred: 2148, files_deleted: 1 };
      this.send('job.progress', { job_id: jobId!, ...counters, listing_done: true, files: [{ path: 'old/gone.txt', status: 'deleted', size: 7, reason: 'not in the source' }] });
      this.send('job.completed', { job_id: jobId!, ...counters });
    }
  }

  close(): void {
    this.ws.close(1000);
  }
}

/** The CLI in a child process, awaited: the agent played in this process must answer meanwhile (spawnSync would block it). */
const xfer = (args: string[]): Promise<CliRun> =>
  startCli(args, { env: cliEnv(home, { XFER_URL: stack.url, XFER_API_KEY: stack.api.token }), timeoutMs: 120_000 });

beforeAll(async () => {
  stack = await startStack({ env: process.env });
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-sync-'));
  const created = await stack.api.data<{ id: string; token: string }>('POST', '/agents', { name: `played ${run}` });
  agent = await PlayedAgent.connect(stack.url, created.token);
  await stack.api.data('POST', '/connections', { name: names.src, type: 'sftp', host: 'sftp.example.test', credentials: { username: 'u', password: 'p' } });
  await stack.api.data('POST', '/connections', { name: names.dst, type: 's3', host: 's3.example.test', credentials: { access_key_id: 'k', secret_access_key: 's' } });
}, 120_000);

afterAll(async () => {
  agent?.close();
  await stack?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
}, 60_000);

test('xfer sync --dry-run: creates a sync transfer with the flags as options, prints the plan table and summary, changes nothing', async () => {
  const res = await xfer(['sync', `${names.src}:/data`, `${names.dst}:backup`, '--dry-run', '--exclude', '*.tmp', '--include', '*.txt', '--max-delete', '10%', '--bwlimit', '1M']);
  expect(agent.errors).toEqual([]);
  expect(res.status).toBe(0);
  const lines = res.stdout.trimEnd().split('\n');
  expect(lines[0]).toMatch(/^ACTION +PATH +SIZE +REASON$/);
  // Skipped files are only counted.
  expect(lines.slice(1, 4)).toEqual([
    expect.stringMatching(/^copy +a\.txt +2\.05 kB +new file$/),
    expect.stringMatching(/^update +docs\/b\.txt +100 B +size differs$/),
    expect.stringMatching(/^delete +old\/gone\.txt +7 B +not in the source$/),
  ]);
  expect(lines[4]).toMatch(/^Plan [0-9a-f]{24}: 1 to copy \(2\.05 kB\), 1 to update \(100 B\), 1 to delete \(7 B\), 1 unchanged$/);
  expect(lines).toHaveLength(5);
  expect(res.stderr).toMatch(/^Dry run: nothing was changed\. Transfer ([0-9a-f]{24}) and its plan are kept: xfer transfers execute \1 --plan [0-9a-f]{24} applies exactly this plan/);

  const assign = agent.assigns[agent.assigns.length - 1]!;
  expect(assign).toMatchObject({
    source_path: '/data', destination_path: '/backup',
    options: { mode: 'sync', max_delete: '10%', bandwidth_limit: 1024 * 1024, filters: { rules: ['- *.tmp', '+ *.txt', '- **'] } },
  });
  const transferId = /Transfer ([0-9a-f]{24})/.exec(res.stderr)![1]!;
  expect(await stack.api.data('GET', `/transfers/${transferId}`)).toMatchObject({ status: 'queued', queued_at: null, options: { mode: 'sync' } });
});

test('xfer sync --dry-run --json: one document {transfer, plan, items}', async () => {
  const res = await xfer(['sync', `${names.src}:/data`, `${names.dst}:/backup`, '--dry-run', '--json']);
  expect(res.status).toBe(0);
  expect(res.stderr).toBe('');
  const doc = jsonOf<{ transfer: { id: string; options: { mode: string } }; plan: Record<string, unknown>; items: PlanItem[] }>(res);
  expect(Object.keys(doc)).toEqual(['transfer', 'plan', 'items']);
  expect(doc.transfer.options.mode).toBe('sync');
  expect(doc.plan).toMatchObject({ transferId: doc.transfer.id, status: 'ready', summary: SUMMARY, fingerprint: 'f'.repeat(64), expired: false });
  expect(doc.items).toEqual(ITEMS.filter((i) => i.action !== 'skip'));
});

test('xfer transfers plan: a new plan as a table, --show the latest, --action and --json', async () => {
  const dry = jsonOf<{ transfer: { id: string }; plan: { id: string } }>(await xfer(['sync', `${names.src}:/p`, `${names.dst}:/q`, '--dry-run', '--json']));
  const id = dry.transfer.id;
  const table = await xfer(['transfers', 'plan', id]);
  expect(table.status).toBe(0);
  expect(table.stdout).toMatch(/^ACTION +PATH +SIZE +REASON$/m);
  expect(table.stdout).toMatch(/^delete +old\/gone\.txt +7 B +not in the source$/m);
  const planId = /^Plan ([0-9a-f]{24}):/m.exec(table.stdout)![1]!;
  expect(planId).not.toBe(dry.plan.id);

  const skipped = await xfer(['transfers', 'plan', id, '--show', '--action', 'skip']);
  expect(skipped.stdout.split('\n').filter((l) => /^skip /.test(l))).toEqual([expect.stringMatching(/^skip +docs\/c\.txt +5 B +same size and mtime$/)]);
  expect(skipped.stdout).toContain(`Plan ${planId}:`);
  const shown = jsonOf<{ plan: { id: string }; items: PlanItem[] }>(await xfer(['transfers', 'plan', id, '--show', '--json', '--action', 'delete']));
  expect(shown.plan.id).toBe(planId);
  expect(shown.items).toEqual([ITEMS[3]]);

  // The older plan is gone with the new one: executing it is refused (exit 4), the new one applies.
  expect((await xfer(['transfers', 'execute', id, '--plan', dry.plan.id])).status).toBe(4);
  const executed = await xfer(['transfers', 'execute', id, '--plan', planId, '--json']);
  expect(executed.status).toBe(0);
  expect(JSON.parse(executed.stdout)).toMatchObject({ id, status: 'completed', files_deleted: 1 });
  expect(agent.applied.get(id)).toEqual(ITEMS);
});

test('xfer sync: plans, prints the plan, applies exactly that plan and follows it to its end', async () => {
  const res = await xfer(['sync', `${names.src}:/live`, `${names.dst}:/mirror`, '--quiet']);
  expect(res.status).toBe(0);
  expect(res.stdout).toMatch(/^delete +old\/gone\.txt +7 B +not in the source$/m);
  expect(res.stdout).toMatch(/^Plan [0-9a-f]{24}: 1 to copy/m);
  expect(res.stdout).toMatch(/^status: +completed$/m);
  expect(res.stdout).toMatch(/^files_deleted: +1$/m);
  const id = /^id: +([0-9a-f]{24})$/m.exec(res.stdout)![1]!;
  expect(agent.applied.get(id)).toEqual(ITEMS);
  const deleted = await stack.api.data<Array<{ path: string; reason: string }>>('GET', `/transfers/${id}/files?status=deleted`);
  expect(deleted.map((f) => [f.path, f.reason])).toEqual([['old/gone.txt', 'not in the source']]);

  const json = await xfer(['sync', `${names.src}:/live2`, `${names.dst}:/mirror2`, '--json']);
  expect(json.status).toBe(0);
  expect(JSON.parse(json.stdout)).toMatchObject({ status: 'completed', files_deleted: 1, options: { mode: 'sync' } });
});

test('xfer sync with a malformed SRC or flag is a usage error; an unknown connection exits 4', async () => {
  expect(await xfer(['sync', '/data', `${names.dst}:/x`, '--dry-run'])).toMatchObject({ status: 2, stderr: expect.stringContaining('Expected CONNECTION:PATH') });
  expect(await xfer(['sync', `${names.src}:/a`, `${names.dst}:/b`, '--bwlimit', 'fast'])).toMatchObject({ status: 2, stderr: expect.stringContaining('--bwlimit "fast" is not a size') });
  expect((await xfer(['sync', `nope-${run}:/a`, `${names.dst}:/b`, '--dry-run'])).status).toBe(4);
  // The server names the field of what only it can check.
  const tz = await xfer(['sync', `${names.src}:/a`, `${names.dst}:/b`, '--window', '22:00-06:00', '--window-tz', 'Mars/Olympus', '--dry-run']);
  expect(tz).toMatchObject({ status: 2, stderr: expect.stringContaining("body.options.window.tz is not a known IANA time zone: 'Mars/Olympus'") });
});
