import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { XferClient, type WorkflowRun } from '@xfer/shared';
import { readSteps, runParams, showRun, stepLine, workflowInput } from './workflows.js';

// Connections given by id: nothing is looked up, so the client is never called (nothing listens on port 9).
const client = new XferClient({ baseUrl: 'http://127.0.0.1:9/api/v1', token: 'unused', retries: 0 });
const SRC = '665f1c2e9b1d4a0012345678';
const DST = '665f1c2e9b1d4a0012345679';
const transfer = { type: 'transfer', sourceConnectionId: SRC, sourcePath: '/in', destinationConnectionId: DST, destinationPath: '/out' };

test('--steps: inline JSON or @FILE, sent as given; not a JSON array of objects is a usage error naming the flag', async () => {
  const steps = [transfer, { type: 'move_source', to: '/done' }];
  expect(await readSteps(client, JSON.stringify(steps))).toEqual(steps);
  const dir = mkdtempSync(join(tmpdir(), 'xfer-steps-'));
  try {
    writeFileSync(join(dir, 's.json'), JSON.stringify(steps));
    expect(await readSteps(client, `@${join(dir, 's.json')}`)).toEqual(steps);
    await expect(readSteps(client, `@${join(dir, 'none.json')}`)).rejects.toMatchObject({ message: `--steps @${join(dir, 'none.json')}: no such file`, oclif: { exit: 2 } });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  await expect(readSteps(client, '[{')).rejects.toMatchObject({ message: expect.stringMatching(/^--steps is not a JSON array of steps: /), oclif: { exit: 2 } });
  await expect(readSteps(client, '{"type":"delete_source"}')).rejects.toThrow('--steps is not a JSON array of steps: expected an array of steps');
  await expect(readSteps(client, '[null]')).rejects.toThrow('--steps is not a JSON array of steps: step 1 is not an object');
  // The fields are the server's to check: an unknown type or field goes as it is.
  expect(await readSteps(client, '[{"type":"teleport","x":1}]')).toEqual([{ type: 'teleport', x: 1 }]);
});

test('only the flags given become fields', async () => {
  expect(await workflowInput(client, {})).toEqual({});
  expect(await workflowInput(client, { name: 'n', 'on-failure': 'continue' })).toEqual({ name: 'n', on_failure: 'continue' });
  expect(await workflowInput(client, { steps: '[{"type":"delete_source"}]' })).toEqual({ steps: [{ type: 'delete_source' }] });
});

test('--param NAME=VALUE: the value may hold = and be empty; malformed or repeated is a usage error naming --param', () => {
  expect(runParams(undefined)).toEqual({});
  expect(runParams(['a=1', 'b=x=y', 'c='])).toEqual({ params: { a: '1', b: 'x=y', c: '' } });
  expect(() => runParams(['novalue'])).toThrow('Expected --param NAME=VALUE, got "novalue"');
  expect(() => runParams(['=v'])).toThrow('Expected --param NAME=VALUE, got "=v"');
  expect(() => runParams(['a=1', 'a=2'])).toThrow('--param a is given twice');
});

const run: WorkflowRun = {
  id: 'r1', workflow_id: 'w1', workflow_name: 'ingest', status: 'failed',
  steps: [
    { type: 'transfer', status: 'completed', transfer_id: 't1', files: null, error: null, started_at: '2026-01-01T00:00:00.000Z', completed_at: '2026-01-01T00:01:00.000Z' },
    { type: 'move_source', status: 'failed', transfer_id: null, files: { moved: 3, deleted: 0, gone: 0, changed: 1, unverified: 0, failed: 2 }, error: '2 files could not be moved', started_at: null, completed_at: null },
    { type: 'notify', status: 'skipped', transfer_id: null, files: null, error: null, started_at: null, completed_at: null },
  ],
  trigger: { type: 'watcher', id: 'w9' }, file: null, params: ['day', 'customer'], error: '2 files could not be moved',
  created_at: '2026-01-01T00:00:00.000Z', completed_at: '2026-01-01T00:01:01.000Z',
};

test('the lines of --follow: a step\'s state, a running transfer\'s id, a settle step\'s counts, the error', () => {
  expect(stepLine(run, 0, '6/6 files, 12.0 kB')).toBe('Step 1/3 transfer: completed (6/6 files, 12.0 kB)');
  expect(stepLine({ ...run, steps: [{ ...run.steps[0]!, status: 'running' }] }, 0)).toBe('Step 1/1 transfer: running (transfer t1)');
  expect(stepLine(run, 1)).toBe('Step 2/3 move_source: failed (3 moved, 1 changed, 2 failed): 2 files could not be moved');
  expect(stepLine(run, 2)).toBe('Step 3/3 notify: skipped');
});

test('a run for people: its fields, then a table of its steps', () => {
  const text = showRun(run);
  expect(text).toMatch(/^status: +failed$/m);
  expect(text).toMatch(/^trigger: +watcher w9$/m);
  expect(text).toMatch(/^params: +day, customer$/m);
  expect(text).toMatch(/^# +TYPE +STATUS +RESULT +STARTED_AT +COMPLETED_AT +ERROR$/m);
  expect(text).toMatch(/^1 +transfer +completed +transfer t1 +2026-01-01T00:00:00.000Z +2026-01-01T00:01:00.000Z +-$/m);
  expect(text).toMatch(/^2 +move_source +failed +3 moved, 1 changed, 2 failed +- +- +2 files could not be moved$/m);
  expect(text).toMatch(/^3 +notify +skipped +- +- +- +-$/m);
});
