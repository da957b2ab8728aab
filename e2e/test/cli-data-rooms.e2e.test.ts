import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, type Stack } from '../src/stack.js';
import { eicar } from '../src/tools/eicar.js';
import { cliEnv, jsonFailure, jsonOf, startCli, type CliFailure, type CliRun } from './support/cli.js';

/**
 * `xfer data-rooms …` run as the built binary against a real control plane with the real clamd:
 * the account's side with a stored login, the invited party's side (open, download, contribute)
 * from a home with no login at all, given nothing but the invite URL.
 */
let stack: Stack;
let home: string;
/** A home without any login: an outside party's machine. */
let outside: string;
let work: string;

const xfer = (args: string[], at = home): Promise<CliRun> => startCli(args, { env: cliEnv(at) });
const json = async <T = any>(args: string[], at = home): Promise<T> => jsonOf<T>(await xfer([...args, '--json'], at));
const fails = async (args: string[], at = home): Promise<CliFailure> => jsonFailure(await xfer([...args, '--json'], at));
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

beforeAll(async () => {
  stack = await startStack({ env: process.env, serverEnv: { XFER_CLAMD: process.env.XFER_TEST_CLAMD! } });
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-rooms-'));
  outside = mkdtempSync(join(tmpdir(), 'xfer-cli-rooms-outside-'));
  work = mkdtempSync(join(tmpdir(), 'xfer-cli-rooms-work-'));
  const login = await startCli(['auth', 'login', '--url', stack.url], { env: cliEnv(home), input: stack.api.token });
  if (login.status !== 0) throw new Error(login.stderr);
}, 120_000);

afterAll(async () => {
  for (const dir of [home, outside, work]) if (dir) rmSync(dir, { recursive: true, force: true });
  await stack?.stop();
}, 60_000);

test('the account side: rooms, files and members, each with --json; bad input exit 2, unknown ids exit 4, a file twice exit 5', async () => {
  const room = await json(['data-rooms', 'create', '--name', 'CLI room', '--description', 'from the shell']);
  expect(room).toMatchObject({ name: 'CLI room', description: 'from the shell', status: 'active', expires_at: null });
  expect(await json(['data-rooms', 'get', room.id])).toEqual(room);
  expect((await json<{ id: string }[]>(['data-rooms', 'list', '--all'])).map((r) => r.id)).toContain(room.id);
  const later = new Date(Date.now() + 86_400_000).toISOString();
  expect(await json(['data-rooms', 'update', room.id, '--expires-at', later])).toMatchObject({ expires_at: later });
  expect(await json(['data-rooms', 'update', room.id, '--clear-expiry'])).toMatchObject({ expires_at: null });
  expect(await fails(['data-rooms', 'create', '--name', 'x', '--expires-at', '2001-01-01T00:00:00Z'])).toEqual({ status: 2, error: 'expires_at must be in the future' });

  const local = join(work, 'terms.txt');
  writeFileSync(local, 'terms and conditions\n');
  const uploaded = await json(['data-rooms', 'files', 'upload', room.id, local]);
  expect(uploaded).toMatchObject({ name: 'terms.txt', path: `/data-rooms/${room.id}` });
  const stored = await json(['files', 'upload', local, '--name', 'annex.txt']);
  expect(await json(['data-rooms', 'files', 'add', room.id, stored.id])).toMatchObject({ id: stored.id, name: 'annex.txt' });
  expect((await fails(['data-rooms', 'files', 'add', room.id, stored.id])).status).toBe(5);
  expect((await json<{ name: string }[]>(['data-rooms', 'files', 'list', room.id])).map((f) => f.name).sort()).toEqual(['annex.txt', 'terms.txt']);
  expect(await json(['data-rooms', 'files', 'remove', room.id, stored.id])).toEqual({ id: stored.id, deleted: true });
  const eicarFile = join(work, 'eicar.com');
  writeFileSync(eicarFile, eicar());
  expect((await fails(['data-rooms', 'files', 'upload', room.id, eicarFile])).status).toBe(2);
  // The room's quota: terms.txt (21 bytes) is in it; a quota of 30 leaves 9 bytes.
  expect(await json(['data-rooms', 'update', room.id, '--quota-bytes', '30'])).toMatchObject({ quota_bytes: 30 });
  expect(await fails(['data-rooms', 'files', 'upload', room.id, local])).toEqual({ status: 2, error: "File exceeds what is left of the data room's quota: 9 of 30 bytes (quota_bytes)" });
  expect((await fails(['data-rooms', 'create', '--name', 'x', '--quota-bytes', '0'])).status).toBe(2);

  const member = await json(['data-rooms', 'members', 'add', room.id, '--email', 'partner@example.test', '--role', 'viewer']);
  expect(member).toMatchObject({ email: 'partner@example.test', role: 'viewer', status: 'active', invite_url: `/api/v1/rooms/${member.token}` });
  const human = await xfer(['data-rooms', 'members', 'add', room.id, '--email', 'other@example.test', '--role', 'contributor']);
  expect(human.status).toBe(0);
  expect(human.stdout).toContain(`${new URL(stack.url).origin}/api/v1/rooms/`);
  expect(human.stderr).toMatch(/shown this once/);
  const listed = await json<Array<{ id: string; token?: string }>>(['data-rooms', 'members', 'list', room.id]);
  expect(listed.map((m) => m.id)).toContain(member.id);
  expect(JSON.stringify(listed)).not.toContain(member.token);
  expect(await fails(['data-rooms', 'members', 'add', room.id, '--email', 'bad', '--role', 'viewer'])).toMatchObject({ status: 2, error: expect.stringMatching(/email/) });
  expect(await json(['data-rooms', 'members', 'remove', room.id, member.id])).toEqual({ id: member.id, deleted: true });

  expect(await json(['data-rooms', 'delete', room.id])).toEqual({ id: room.id, deleted: true });
  expect((await fails(['data-rooms', 'get', room.id])).status).toBe(4);
}, 120_000);

test('the invited party, with no login and only the invite URL: open, download byte-identical, contribute; a viewer cannot upload; revoked is exit 4', async () => {
  const room = await json(['data-rooms', 'create', '--name', 'Shared with partner']);
  const content = randomBytes(80_000);
  const local = join(work, 'model.bin');
  writeFileSync(local, content);
  const file = await json(['data-rooms', 'files', 'upload', room.id, local]);
  const contributor = await json(['data-rooms', 'members', 'add', room.id, '--email', 'c@partner.test', '--role', 'contributor']);
  const viewer = await json(['data-rooms', 'members', 'add', room.id, '--email', 'v@partner.test', '--role', 'viewer']);
  const origin = new URL(stack.url).origin;
  const contributorUrl = `${origin}${contributor.invite_url}`;
  const viewerUrl = `${origin}${viewer.invite_url}`;

  const view = await json(['data-rooms', 'open', viewerUrl], outside);
  expect(view).toMatchObject({ room: { id: room.id, name: 'Shared with partner' }, member: { role: 'viewer' }, files: [{ id: file.id, name: 'model.bin' }] });
  const table = await xfer(['data-rooms', 'open', viewerUrl], outside);
  expect(table.stdout).toMatch(new RegExp(`^${file.id} +model\\.bin`, 'm'));

  const out = join(work, 'downloaded.bin');
  const saved = await json(['data-rooms', 'download', viewerUrl, file.id, '-o', out], outside);
  expect(saved).toMatchObject({ sha256: sha256(content) });
  expect(sha256(readFileSync(out))).toBe(sha256(content));

  const note = join(work, 'note.txt');
  writeFileSync(note, 'from the partner\n');
  expect((await fails(['data-rooms', 'contribute', viewerUrl, note], outside)).status).toBe(3);
  const added = await json(['data-rooms', 'contribute', contributorUrl, note], outside);
  expect(added).toMatchObject({ name: 'note.txt', size: 17 });
  expect((await json<{ id: string }[]>(['data-rooms', 'files', 'list', room.id])).map((f) => f.id)).toContain(added.id);

  await json(['data-rooms', 'members', 'remove', room.id, viewer.id]);
  expect(await fails(['data-rooms', 'open', viewerUrl], outside)).toEqual({ status: 4, error: 'This invite has been revoked' });
}, 120_000);
