import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import puppeteer, { type Browser } from 'puppeteer-core';
import { ApiError, XferClient } from '@xfer/shared';
import { startStack, type Stack } from '../src/stack.js';
import { eicar } from '../src/tools/eicar.js';
import { makeTestCertificate, WebhookReceiver, type TestCertificate } from '../src/tools/webhook-receiver.js';

/**
 * Data rooms with the real binaries: `xfer-server` with the real clamd and a signed webhook to an
 * HTTPS receiver. The outside parties hold nothing but their invite URLs: the typed client without
 * a key, and headless Debian Chromium (puppeteer-core, never a downloaded browser) on the page a
 * browser gets at the invite URL.
 */
const env = process.env;
const PATH = '/xfer-rooms';
const CHROMIUM = '/usr/bin/chromium';
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

let cert: TestCertificate;
let receiver: WebhookReceiver;
let stack: Stack;
let owner: XferClient;
/** An outside party: the server's URL and nothing else. */
let outsider: XferClient;
let origin: string;
const work = mkdtempSync(join(tmpdir(), 'xfer-rooms-e2e-'));

beforeAll(async () => {
  cert = makeTestCertificate({ ips: ['127.0.0.1'] });
  receiver = await WebhookReceiver.start(cert);
  stack = await startStack({
    env,
    serverEnv: {
      XFER_CLAMD: env.XFER_TEST_CLAMD!,
      XFER_UNSAFE_WEBHOOK_ALLOW: '127.0.0.1/32',
      NODE_EXTRA_CA_CERTS: cert.certPath,
      XFER_WEBHOOK_BACKOFF_BASE_MS: '200',
      XFER_WEBHOOK_POLL_MS: '100',
    },
  });
  owner = new XferClient({ baseUrl: stack.url, token: stack.api.token });
  outsider = new XferClient({ baseUrl: stack.url, retries: 0 });
  origin = new URL(stack.url).origin;
  const hook = await stack.api.call<{ data: { secret: string } }>('POST', '/webhooks', {
    url: receiver.url(PATH), events: ['data_room.created', 'data_room.file_added', 'data_room.member_added'],
  });
  if (hook.status !== 201) throw new Error(`create webhook: ${hook.status} ${JSON.stringify(hook.body)}`);
  receiver.secrets.set(PATH, hook.body.data.secret);
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await receiver?.stop();
  cert?.remove();
  rmSync(work, { recursive: true, force: true });
}, 60_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const once = (content: Buffer) => [content];

/** The error of a call that must fail. */
async function failure(call: Promise<unknown>): Promise<ApiError> {
  try {
    await call;
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error('the call succeeded');
}

async function readAll(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

test('with only their invite URLs: a viewer lists and downloads, a contributor uploads (EICAR refused), a revoked member is 410; audited and signed events', async () => {
  const room = await owner.dataRooms.create({ name: 'Due diligence', description: 'Project Falcon' });
  const deck = randomBytes(300_000);
  const inRoom = await owner.dataRooms.upload(room.id, { name: 'deck.pdf', content: once(deck), size: deck.length });
  expect(inRoom).toMatchObject({ name: 'deck.pdf', sha256: sha256(deck), path: `/data-rooms/${room.id}` });
  const viewer = await owner.dataRooms.addMember(room.id, { email: 'counsel@partner.test', role: 'viewer' });
  const contributor = await owner.dataRooms.addMember(room.id, { email: 'cfo@partner.test', role: 'contributor' });
  const viewerUrl = `${origin}${viewer.invite_url}`;
  const contributorUrl = `${origin}${contributor.invite_url}`;

  // The viewer: the room and its file, byte-identical; no upload.
  const seen = await outsider.dataRooms.view(viewerUrl);
  expect(seen.room).toMatchObject({ id: room.id, name: 'Due diligence' });
  expect(seen.files.map((f) => f.id)).toEqual([inRoom.id]);
  const got = await outsider.dataRooms.download(viewerUrl, inRoom.id);
  expect(got.status).toBe(200);
  expect((await readAll(got.body)).equals(deck)).toBe(true);
  expect((await failure(outsider.dataRooms.contribute(viewerUrl, { name: 'x.txt', content: once(Buffer.from('x')) }))).status).toBe(403);

  // The contributor: a clean file lands in the room, EICAR is refused and nothing is kept.
  const signed = Buffer.from(`signed ${randomBytes(8).toString('hex')}\n`);
  const up = await outsider.dataRooms.contribute(contributorUrl, { name: 'signed.txt', content: once(signed), size: signed.length });
  expect(up).toMatchObject({ name: 'signed.txt', sha256: sha256(signed) });
  const filesBefore = (await owner.files.list({ path: `/data-rooms/${room.id}` })).data.length;
  const blocked = await failure(outsider.dataRooms.contribute(contributorUrl, { name: 'eicar.com', content: once(eicar()) }));
  expect(blocked.status).toBe(422);
  expect(blocked.message).toMatch(/File rejected: malware detected/);
  expect((await owner.files.list({ path: `/data-rooms/${room.id}` })).data.length).toBe(filesBefore);
  expect((await owner.dataRooms.files(room.id)).data.map((f) => f.name).sort()).toEqual(['deck.pdf', 'signed.txt']);

  // Revoked: 410 on the very next request.
  await owner.dataRooms.removeMember(room.id, viewer.id);
  expect((await failure(outsider.dataRooms.view(viewerUrl))).status).toBe(410);
  expect((await failure(outsider.dataRooms.download(viewerUrl, inRoom.id))).status).toBe(410);

  // /activity names the member as the actor of each of its actions.
  const byActor = async (id: string) => (await owner.activity.list({ actor_type: 'room_member', actor_id: id, limit: 100 })).data
    .map((a) => `${a.action} ${a.outcome}`).sort();
  expect(await byActor(viewer.id)).toEqual(['data_room.view success', 'file.download success', 'file.upload denied']);
  expect(await byActor(contributor.id)).toEqual(['file.upload denied', 'file.upload success']);

  // The three data_room events reach the webhook, signed.
  const expected = new Set([
    `data_room.created ${room.id}`, `data_room.file_added ${inRoom.id}`, `data_room.file_added ${up.id}`,
    `data_room.member_added ${viewer.id}`, `data_room.member_added ${contributor.id}`,
  ]);
  const keyOf = (body: { event: string; data: { id?: string; file_id?: string; member_id?: string } }) =>
    `${body.event} ${body.data.member_id ?? body.data.file_id ?? body.data.id}`;
  const deadline = Date.now() + 60_000;
  const got2 = () => receiver.to(PATH).map((r) => ({ key: keyOf(JSON.parse(r.body.toString('utf8'))), verified: r.verified }));
  while (new Set(got2().map((g) => g.key)).size < expected.size && Date.now() < deadline) await sleep(100);
  expect(new Set(got2().map((g) => g.key))).toEqual(expected);
  expect(got2().every((g) => g.verified)).toBe(true);
}, 120_000);

describe('in a browser', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  }, 60_000);
  afterAll(async () => browser?.close());

  test("a contributor's invite URL shows the files, downloads one byte-identical and uploads one through the page", async () => {
    const room = await owner.dataRooms.create({ name: 'Browser room' });
    const report = randomBytes(150_000);
    const file = await owner.dataRooms.upload(room.id, { name: 'report.bin', content: once(report), size: report.length });
    const member = await owner.dataRooms.addMember(room.id, { email: 'browser@partner.test', role: 'contributor' });
    const url = `${origin}${member.invite_url}`;

    const page = await browser.newPage();
    const violations: string[] = [];
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) violations.push(m.text()); });
    const res = await page.goto(url, { waitUntil: 'load' });
    expect(res!.status()).toBe(200);
    expect(res!.headers()['content-security-policy']).toMatch(/^default-src 'none'/);
    expect(await page.$$eval('#files tbody tr a', (els) => els.map((e) => (e as unknown as { textContent: string | null }).textContent))).toEqual(['report.bin']);

    // Download through the page's link into a folder of our own.
    const downloads = mkdtempSync(join(work, 'dl-'));
    const cdp = await page.createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads });
    await page.click('#files tbody tr a');
    const saved = join(downloads, 'report.bin');
    for (const until = Date.now() + 30_000; Date.now() < until; await sleep(100)) {
      if (readdirSync(downloads).includes('report.bin')) break;
    }
    expect(sha256(readFileSync(saved))).toBe(sha256(report));
    expect(file.sha256).toBe(sha256(report));

    // Upload through the page's form: the redirect brings the page back with the new file.
    const local = join(work, 'from-browser.txt');
    const content = Buffer.from(`uploaded from chromium ${randomBytes(6).toString('hex')}\n`);
    writeFileSync(local, content);
    const input = await page.$('#upload input[type=file]');
    await (input as unknown as { uploadFile(path: string): Promise<void> }).uploadFile(local);
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#upload button[type=submit]')]);
    expect(page.url()).toBe(`${url}?notice=uploaded`);
    expect(await page.$eval('.notice', (e) => (e as unknown as { textContent: string | null }).textContent)).toBe('Your file was uploaded and scanned.');
    expect((await page.$$eval('#files tbody tr a', (els) => els.map((e) => (e as unknown as { textContent: string | null }).textContent))).sort()).toEqual(['from-browser.txt', 'report.bin']);
    const listed = (await owner.dataRooms.files(room.id)).data.find((f) => f.name === 'from-browser.txt');
    expect(listed).toMatchObject({ sha256: sha256(content), uploaded_by: { type: 'room_member', id: member.id } });

    // The screenshot is a real rendering of the page: a PNG of the viewport with ink on it.
    await page.setViewport({ width: 800, height: 600 });
    const shot = Buffer.from(await page.screenshot({ type: 'png' }));
    writeFileSync(join(work, 'room.png'), shot);
    const png = decodePng(shot);
    expect({ width: png.width, height: png.height }).toEqual({ width: 800, height: 600 });
    expect(png.darkShare).toBeGreaterThan(0.002);
    expect(png.darkShare).toBeLessThan(0.5);
    expect(violations).toEqual([]);
    await page.close();
  }, 120_000);
});

/** Width, height and the share of dark pixels of a PNG (enough to tell a rendered page from a blank one). */
function decodePng(png: Buffer): { width: number; height: number; darkShare: number } {
  const { width, height, data } = PNG.sync.read(png);
  let dark = 0;
  for (let i = 0; i < data.length; i += 4) if (data[i]! + data[i + 1]! + data[i + 2]! < 300) dark++;
  return { width, height, darkShare: dark / (width * height) };
}
