import { createHash, randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { ConnectorError } from '../connectors/types.js';
import { VerifyError } from '../copy/errors.js';
import { RelayBreach, RelayTarWriter } from './relay-tar.js';
import { TarReceiver } from './tar-receiver.js';

const MiB = 1024 * 1024;
const signal = new AbortController().signal;

/** The tar stream the source side would send for `files` (in order), as payloads of at most 256 KiB. */
async function tarOf(files: { path: string; data: Buffer | null }[]): Promise<Buffer[]> {
  const writer = new RelayTarWriter();
  const parts: Buffer[] = [];
  writer.output.on('data', (chunk) => parts.push(chunk as Buffer));
  for (const f of files) await writer.file(f.path, f.data?.length ?? 1, f.data ? [f.data] : null, signal, 'permission denied');
  await new Promise((resolve) => setImmediate(resolve));
  const all = Buffer.concat(parts);
  const out: Buffer[] = [];
  for (let i = 0; i < all.length; i += 256 * 1024) out.push(all.subarray(i, i + 256 * 1024));
  return out;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function receiver(memoryBytes = 4 * MiB) {
  const seen = { consumed: 0, breaches: [] as RelayBreach[] };
  const r = new TarReceiver({ memoryBytes, onConsumed: (n) => { seen.consumed += n; }, onBreach: (err) => seen.breaches.push(err) });
  return { r, seen };
}

describe('the destination end of a relay tar stream', () => {
  test('hands each wanted file its bytes in want order, small ones whole and large ones streamed, and gives every byte back as credit', async () => {
    const small = randomBytes(10_000);
    const large = randomBytes(3 * MiB + 17);
    const empty = Buffer.alloc(0);
    const tar = await tarOf([{ path: 'a/small', data: small }, { path: 'large', data: large }, { path: 'empty', data: empty }]);
    const { r, seen } = receiver();
    const wants = [r.want('a/small', small.length, signal), r.want('large', large.length, signal), r.want('empty', 0, signal)];
    for (const payload of tar) r.push(payload);
    const [a, b, c] = await Promise.all(wants.map(async (w) => readAll(await w)));
    expect(a!.equals(small)).toBe(true);
    expect(createHash('sha256').update(b!).digest('hex')).toBe(createHash('sha256').update(large).digest('hex'));
    expect(c!.length).toBe(0);
    expect(seen.consumed).toBe(tar.reduce((n, p) => n + p.length, 0));
    expect(seen.breaches).toEqual([]);
  });

  test('a byte changed in transit fails the file with a retryable VerifyError: small ones before they are handed out, large ones at their end', async () => {
    const small = randomBytes(5000);
    const large = randomBytes(2 * MiB);
    const tar = Buffer.concat(await tarOf([{ path: 's', data: small }, { path: 'l', data: large }]));
    // Each content follows its pax header and header: flip a byte inside each.
    const flip = (needle: Buffer) => { const at = tar.indexOf(needle); tar[at + 100] ^= 0x01; };
    flip(small.subarray(0, 64));
    flip(large.subarray(0, 64));
    const { r, seen } = receiver();
    const s = r.want('s', small.length, signal);
    const l = r.want('l', large.length, signal);
    r.push(tar);
    await expect(s).rejects.toBeInstanceOf(VerifyError);
    await expect(readAll(await l)).rejects.toThrow(/do not match the source's SHA-256/);
    expect(seen.breaches).toEqual([]);
  });

  test('a trailer with xfer.error fails the file as a transient fault, and the stream goes on', async () => {
    const ok = randomBytes(100);
    const { r } = receiver();
    const gone = r.want('gone', 1, signal);
    const next = r.want('ok', ok.length, signal);
    for (const payload of await tarOf([{ path: 'gone', data: null }, { path: 'ok', data: ok }])) r.push(payload);
    const err = await gone.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectorError);
    expect(err).toMatchObject({ code: 'TRANSIENT', message: expect.stringMatching(/could not read gone: permission denied/) });
    expect((await readAll(await next)).equals(ok)).toBe(true);
  });

  test('a file its reader gave up on is read off the stream and dropped; the next one still arrives', async () => {
    const big = randomBytes(2 * MiB);
    const small = randomBytes(300);
    const { r, seen } = receiver();
    const aborted = new AbortController();
    const first = r.want('big', big.length, aborted.signal);
    const firstSmall = r.want('small-1', small.length, aborted.signal);
    const second = r.want('small-2', small.length, signal);
    aborted.abort(new Error('cancelled'));
    await expect(first).rejects.toThrow('cancelled');
    await expect(firstSmall).rejects.toThrow('cancelled');
    const tar = await tarOf([{ path: 'big', data: big }, { path: 'small-1', data: small }, { path: 'small-2', data: small }]);
    for (const payload of tar) r.push(payload);
    expect((await readAll(await second)).equals(small)).toBe(true);
    expect(seen.consumed).toBe(tar.reduce((n, p) => n + p.length, 0));
  });

  test('small files waiting to be written hold memory up to the budget; past it the stream waits (no credit is given back) until one is written', async () => {
    const files = Array.from({ length: 5 }, (_, i) => ({ path: `f${i}`, data: randomBytes(MiB) }));
    const tar = await tarOf(files);
    const { r, seen } = receiver(2 * MiB);
    const wants = files.map((f) => r.want(f.path, f.data.length, signal));
    for (const payload of tar) r.push(payload);
    const first = await wants[0]!;
    await wants[1]!;
    await new Promise((resolve) => setTimeout(resolve, 50));
    // Two files in memory, the third waits for room: at most a payload or two beyond them was parsed.
    let third = false;
    void wants[2]!.then(() => { third = true; });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(third).toBe(false);
    expect(seen.consumed).toBeLessThan(2 * MiB + 3 * 256 * 1024);
    expect((await readAll(first)).equals(files[0]!.data)).toBe(true);
    const rest = await Promise.all(wants.slice(1).map(async (w) => readAll(await w)));
    expect(rest.map((b, i) => b.equals(files[i + 1]!.data))).toEqual([true, true, true, true]);
  });

  test('an entry nobody wanted next is a breach: every file still wanted fails', async () => {
    const { r, seen } = receiver();
    const wanted = r.want('b', 3, signal);
    for (const payload of await tarOf([{ path: 'a', data: Buffer.from('aaa') }])) r.push(payload);
    await expect(wanted).rejects.toBeInstanceOf(RelayBreach);
    expect(seen.breaches.map((e) => e.message)).toEqual(['the source sent "a" where "b" was wanted next']);
    await expect(r.want('c', 1, signal)).rejects.toBeInstanceOf(RelayBreach);
  });

  test('bytes that are no tar are a breach', async () => {
    const { r, seen } = receiver();
    const wanted = r.want('a', 3, signal);
    r.push(randomBytes(1024));
    await expect(wanted).rejects.toThrow(/not valid/);
    expect(seen.breaches).toHaveLength(1);
  });
});
