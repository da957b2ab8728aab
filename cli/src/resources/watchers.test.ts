import { XferClient, type WatcherTransfer } from '@xfer/shared';
import { actionInput, givesAction, watchingInput } from './watchers.js';

// Connections given by id: nothing is looked up, so the client is never called.
const client = new XferClient({ baseUrl: 'http://127.0.0.1:9/api/v1', token: 'unused' });
const DEST = '665f1c2e9b1d4a0012345678';
const current: WatcherTransfer = { destinationConnectionId: DEST, destinationPath: '/out', options: { overwrite: 'never', verify: 'size', concurrency: 8 } };

test('the watching flags become the API fields of the same meaning; absent ones are left out', async () => {
  expect(await watchingInput(client, {})).toEqual({});
  expect(await watchingInput(client, {
    name: 'n', connection: DEST, path: '/in', pattern: '*.csv', recursive: false, 'poll-interval': 30, stable: 0, 'include-existing': true, active: false,
  })).toEqual({
    name: 'n', connectionId: DEST, path: '/in', pattern: '*.csv', recursive: false, poll_interval_seconds: 30, stable_seconds: 0, include_existing: true, active: false,
  });
});

test('an update of one transfer flag sends the whole transfer with that flag applied', async () => {
  expect(await actionInput(client, { 'dest-path': '/new' }, current)).toEqual({ transfer: { ...current, destinationPath: '/new' } });
  expect(await actionInput(client, { concurrency: 2 }, current)).toEqual({ transfer: { ...current, options: { ...current.options, concurrency: 2 } } });
});

test('--workflow replaces the transfer; with transfer flags too, both are sent for the server to refuse', async () => {
  // A workflow given by id: nothing is looked up either.
  const WORKFLOW = '665f1c2e9b1d4a00123456ff';
  expect(await actionInput(client, { workflow: WORKFLOW }, current)).toEqual({ workflowId: WORKFLOW });
  expect(await actionInput(client, { dest: DEST, 'dest-path': '/o', workflow: WORKFLOW })).toEqual({
    transfer: { destinationConnectionId: DEST, destinationPath: '/o' }, workflowId: WORKFLOW,
  });
  expect(givesAction({})).toBe(false);
  expect(await actionInput(client, {})).toEqual({});
});
