import { createHash, randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { ApiError, exitCodeOf, XferClient, type Download } from '@xfer/shared';
import { startStack, type Stack } from '../src/stack.js';
import { eicar } from '../src/tools/eicar.js';
import { keystream } from '../src/tools/file-transfer.js';

/**
 * The typed API client (`shared/src/client`) against the real `xfer-server` binary, uploads
 * scanned by the real clamd: what the CLI builds on behaves as the API documents, errors map to
 * the CLI's exit codes, and files stream up and down byte-identical.
 */
let stack: Stack;
let client: XferClient;

beforeAll(async () => {
  if (!process.env.XFER_TEST_CLAMD) throw new Error('XFER_TEST_CLAMD is not set: run through jest (its global setup starts clamd)');
  stack = await startStack({
    env: process.env,
    serverEnv: { XFER_CLAMD: process.env.XFER_TEST_CLAMD },
  });
  client = new XferClient({ baseUrl: stack.url, token: stack.api.token, retries: 0 });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

/** The `ApiError` a call rejects with. */
async function failure(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(() => { throw new Error('expected the call to fail'); }, (e: unknown) => e);
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

/** A loopback port where nothing listens (just freed). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function sha256Of(d: Download): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of d.body) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), bytes };
}

test('health answers ok without a token', async () => {
  await expect(new XferClient({ baseUrl: stack.url }).health()).resolves.toEqual({ status: 'ok' });
});

test('connections: create, page through all() with a small limit, update, 404 and 409 mapped, delete', async () => {
  const names = Array.from({ length: 5 }, (_, i) => `client-nfs-${i}`);
  const created = [];
  for (const name of names) created.push(await client.connections.create({ name, type: 'nfs', host: 'nfs.example.test', path: '/export' }));
  expect(created[0]).toMatchObject({ name: 'client-nfs-0', type: 'nfs', port: 2049, path: '/export', has_credentials: false });

  const first = await client.connections.list({ limit: 2 });
  expect(first.data).toHaveLength(2);
  expect(first.next_cursor).toEqual(expect.any(String));
  const all = await client.connections.all({ limit: 2 }).toArray();
  // Newest first, every one exactly once across three pages.
  expect(all.map((c) => c.name)).toEqual([...names].reverse());

  const updated = await client.connections.update(created[0]!.id, { port: 2050, host: 'nfs2.example.test' });
  expect(updated).toMatchObject({ id: created[0]!.id, port: 2050, host: 'nfs2.example.test', name: 'client-nfs-0' });
  await expect(client.connections.get(created[0]!.id)).resolves.toMatchObject({ port: 2050 });

  const duplicate = await failure(client.connections.create({ name: 'client-nfs-1', type: 'nfs', host: 'h.example.test' }));
  expect(duplicate).toMatchObject({ status: 409, kind: 'conflict' });
  expect(exitCodeOf(duplicate)).toBe(5);

  const invalid = await failure(client.connections.create({ name: 'bad port', type: 'nfs', host: 'h', port: 70000 }));
  expect(invalid).toMatchObject({ status: 400, kind: 'invalid', message: expect.stringContaining('port') });
  expect(exitCodeOf(invalid)).toBe(2);

  for (const c of created) await expect(client.connections.delete(c.id)).resolves.toEqual({ id: c.id, deleted: true });
  const missing = await failure(client.connections.get(created[0]!.id));
  expect(missing).toMatchObject({ status: 404, kind: 'not_found', message: expect.stringContaining(created[0]!.id) });
  expect(exitCodeOf(missing)).toBe(4);
});

test('api keys: create shows the key once with its warning, list shows the prefix, a revoked key is 401 (exit 3)', async () => {
  const { data: key, warning } = await client.apiKeys.create({ name: 'client e2e', scopes: ['connections:read'] });
  expect(key.key).toMatch(/^svc_/);
  expect(warning).toBe('Store this key now: it cannot be shown again.');

  const listed = await client.apiKeys.all().toArray();
  const mine = listed.find((k) => k.id === key.id);
  expect(mine).toMatchObject({ name: 'client e2e', key_prefix: `${key.key.slice(0, 12)}...`, scopes: ['connections:read'] });
  expect(mine).not.toHaveProperty('key');

  const keyed = new XferClient({ baseUrl: stack.url, token: key.key, retries: 0 });
  // Arrays parsed by fetch come from another realm than jest's: Array.isArray, not expect.any(Array).
  expect(Array.isArray((await keyed.connections.list()).data)).toBe(true);
  const forbidden = await failure(keyed.files.list());
  expect(forbidden).toMatchObject({ status: 403, kind: 'forbidden', message: 'API key missing required scope' });
  expect(exitCodeOf(forbidden)).toBe(3);

  await expect(client.apiKeys.revoke(key.id)).resolves.toEqual({ id: key.id, deleted: true });
  const revoked = await failure(keyed.connections.list());
  expect(revoked).toMatchObject({ status: 401, kind: 'unauthenticated', message: 'Invalid or expired credentials' });
  expect(exitCodeOf(revoked)).toBe(3);
});

test('files: a few MB stream up, are found by search, come back byte-identical (whole and a range), are shared and deleted', async () => {
  const size = 5 * 1024 * 1024 + 123;
  const seed = randomBytes(32);
  const expected = await sha256Of({ body: keystream(size, seed) } as Download);
  const name = `client-${randomBytes(3).toString('hex')}.bin`;

  const file = await client.files.upload({ name, path: '/client-e2e', size, content: keystream(size, seed) });
  expect(file).toMatchObject({ name, path: '/client-e2e', size, sha256: expected.sha256 });

  await expect(client.files.search({ q: name })).resolves.toMatchObject({ data: [{ id: file.id }], next_cursor: null });
  await expect(client.files.all({ path: '/client-e2e' }).toArray()).resolves.toEqual([file]);

  const whole = await client.files.download(file.id);
  expect(whole).toMatchObject({ status: 200, size, fileName: name, etag: `"${expected.sha256}"` });
  await expect(sha256Of(whole)).resolves.toEqual(expected);

  const part = await client.files.download(file.id, { range: { start: 10, end: 19 } });
  expect(part).toMatchObject({ status: 206, size: 10, contentRange: `bytes 10-19/${size}` });
  const partBytes = await sha256Of(part);
  expect(partBytes.bytes).toBe(10);

  const share = await client.shares.create(file.id, { max_downloads: 1 });
  expect(share.url).toBe(`/api/v1/files/shared/${share.token}`);
  const anonymous = new XferClient({ baseUrl: stack.url, retries: 0 });
  await expect(sha256Of(await anonymous.shares.download(share.url))).resolves.toEqual(expected);
  const exhausted = await failure(anonymous.shares.download(share.token));
  expect(exhausted).toMatchObject({ status: 410, kind: 'gone', message: 'Share link download limit reached' });
  expect(exitCodeOf(exhausted)).toBe(4);
  expect(exhausted.url).not.toContain(share.token);

  await expect(client.shares.listForFile(file.id)).resolves.toMatchObject({ data: [{ id: share.id, downloads: 1, status: 'exhausted' }] });
  await expect(client.shares.revoke(file.id, share.id)).resolves.toEqual({ id: share.id, deleted: true });
  await expect(client.shares.all().toArray()).resolves.toEqual(expect.arrayContaining([expect.objectContaining({ id: share.id, status: 'revoked' })]));

  await expect(client.files.delete(file.id)).resolves.toEqual({ id: file.id, deleted: true });
  expect(await failure(client.files.download(file.id))).toMatchObject({ status: 404, kind: 'not_found' });
}, 120_000);

test('an upload the malware scan blocks is 422, kind invalid (exit 2)', async () => {
  const malware = await failure(client.files.upload({ name: 'eicar.com', content: [eicar()] }));
  expect(malware).toMatchObject({ status: 422, kind: 'invalid', message: expect.stringMatching(/^File rejected: malware detected \(.+\)$/) });
  expect(exitCodeOf(malware)).toBe(2);
}, 60_000);

test('webhooks: create with a generated secret, list, update, deliveries, delete', async () => {
  const { data: hook, warning } = await client.webhooks.create({ url: 'https://8.8.8.8/hook', events: ['file.uploaded'] });
  expect(hook).toMatchObject({ url: 'https://8.8.8.8/hook', events: ['file.uploaded'], active: true, secret: expect.stringMatching(/^whsec_/) });
  expect(warning).toBe('Store this signing secret now: it cannot be shown again.');

  await expect(client.webhooks.all().toArray()).resolves.toEqual([expect.objectContaining({ id: hook.id, url: 'https://8.8.8.8/hook' })]);
  await expect(client.webhooks.update(hook.id, { active: false })).resolves.toMatchObject({ id: hook.id, active: false });
  await expect(client.webhooks.deliveries(hook.id)).resolves.toEqual({ data: [], next_cursor: null });

  const refused = await failure(client.webhooks.create({ url: 'http://8.8.8.8/hook', events: ['file.uploaded'] }));
  expect(refused).toMatchObject({ status: 400, kind: 'invalid', message: 'url must use https (got http:)' });

  await expect(client.webhooks.delete(hook.id)).resolves.toEqual({ id: hook.id, deleted: true });
  expect(await failure(client.webhooks.get(hook.id))).toMatchObject({ status: 404, kind: 'not_found' });
});

test('a server that is gone is a network error naming it (exit 6)', async () => {
  const port = await freePort();
  const unreachable = new XferClient({ baseUrl: `http://127.0.0.1:${port}/api/v1`, retries: 0 });
  const err = await failure(unreachable.health());
  expect(err).toMatchObject({ kind: 'network', message: `Connection refused to http://127.0.0.1:${port}: is the xfer server running there?` });
  expect(exitCodeOf(err)).toBe(6);
});
