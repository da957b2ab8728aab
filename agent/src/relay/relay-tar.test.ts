import { createHash } from 'node:crypto';
import { extract, pack, type Header } from 'tar-stream';
import { contentHeader, readEntryHeader, RelayBreach, RelayTarWriter, trailerHeader, type RelayTarEntry } from './relay-tar.js';

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** Everything `writer` packed so far (its output read as it comes). */
function collect(writer: RelayTarWriter): () => Buffer {
  const chunks: Buffer[] = [];
  writer.output.on('data', (chunk) => chunks.push(chunk as Buffer));
  return () => Buffer.concat(chunks);
}

/** The entries of a tar stream as the destination reads them, with their content. */
async function entries(tar: Buffer): Promise<{ entry: RelayTarEntry; content: Buffer }[]> {
  const out: { entry: RelayTarEntry; content: Buffer }[] = [];
  const parser = extract();
  const done = new Promise<void>((resolve, reject) => {
    parser.on('entry', (header, stream, next) => {
      const parts: Buffer[] = [];
      stream.on('data', (d) => parts.push(d as Buffer));
      stream.on('end', () => {
        out.push({ entry: readEntryHeader(header), content: Buffer.concat(parts) });
        next();
      });
    });
    parser.on('finish', () => resolve());
    parser.on('error', reject);
  });
  parser.end(tar);
  await done;
  return out;
}

/** Ends the writer's output as a tar archive ends (two zero blocks), so the parser finishes. */
async function ended(writer: RelayTarWriter): Promise<void> {
  writer.output.push(Buffer.alloc(1024));
  writer.output.push(null);
  await new Promise<void>((resolve) => writer.output.on('end', () => resolve()));
}

async function* chunksOf(...parts: (Buffer | Error)[]): AsyncGenerator<Buffer> {
  for (const part of parts) {
    if (part instanceof Error) throw part;
    yield part;
  }
}

const signal = new AbortController().signal;

describe('relay tar stream (the contract of relay-protocol.ts)', () => {
  test('each wanted file is a content entry of its size, then a trailer with the SHA-256 of what was read; unicode and long names survive', async () => {
    const writer = new RelayTarWriter();
    const tar = collect(writer);
    const long = `${'deep/'.repeat(40)}fïlé ✓ with a name past the 100 bytes of a plain tar header.bin`;
    const a = Buffer.from('hello relay');
    const b = Buffer.alloc(70_000, 7);
    expect(await writer.file('a.txt', a.length, chunksOf(a), signal)).toEqual({ sha256: sha256(a) });
    expect(await writer.file(long, b.length, chunksOf(b.subarray(0, 1000), b.subarray(1000)), signal)).toEqual({ sha256: sha256(b) });
    expect(await writer.file('empty', 0, chunksOf(), signal)).toEqual({ sha256: sha256(Buffer.alloc(0)) });
    await ended(writer);
    expect(await entries(tar())).toEqual([
      { entry: { kind: 'file', path: 'a.txt', size: a.length }, content: a },
      { entry: { kind: 'sum', path: 'a.txt', sha256: sha256(a) }, content: Buffer.alloc(0) },
      { entry: { kind: 'file', path: long, size: b.length }, content: b },
      { entry: { kind: 'sum', path: long, sha256: sha256(b) }, content: Buffer.alloc(0) },
      { entry: { kind: 'file', path: 'empty', size: 0 }, content: Buffer.alloc(0) },
      { entry: { kind: 'sum', path: 'empty', sha256: sha256(Buffer.alloc(0)) }, content: Buffer.alloc(0) },
    ]);
  });

  test.each([
    ['fewer bytes than listed: zero-padded', chunksOf(Buffer.from('abc')), Buffer.from('abc\0\0\0\0\0'), /listed 8 bytes, read 3/],
    ['more bytes than listed: cut', chunksOf(Buffer.from('abcdefgh'), Buffer.from('ij')), Buffer.from('abcdefgh'), /listed 8 bytes, read more/],
    ['a read that fails midway: zero-padded, the reason in the trailer', chunksOf(Buffer.from('abcd'), new Error('connection reset')), Buffer.from('abcd\0\0\0\0'), /connection reset/],
  ])('%s, and the trailer says xfer.error instead of a SHA-256', async (_name, body, content, error) => {
    const writer = new RelayTarWriter();
    const tar = collect(writer);
    const result = await writer.file('f.bin', 8, body, signal);
    expect(result).toEqual({ error: expect.stringMatching(error) });
    await ended(writer);
    const [file, trailer] = await entries(tar());
    expect(file).toEqual({ entry: { kind: 'file', path: 'f.bin', size: 8 }, content });
    expect(trailer!.entry).toEqual({ kind: 'sum', path: 'f.bin', error: expect.stringMatching(error) });
  });

  test('a file that could not be opened gets its trailer alone', async () => {
    const writer = new RelayTarWriter();
    const tar = collect(writer);
    expect(await writer.file('gone.txt', 5, null, signal, 'no such file')).toEqual({ error: 'no such file' });
    await ended(writer);
    expect((await entries(tar())).map((e) => e.entry)).toEqual([{ kind: 'sum', path: 'gone.txt', error: 'no such file' }]);
  });

  test('writing waits while the output is not read: the writer holds about its high-water mark, not the file', async () => {
    const writer = new RelayTarWriter({ highWaterMark: 64 * 1024 });
    let produced = 0;
    async function* big(): AsyncGenerator<Buffer> {
      for (let i = 0; i < 64; i++) {
        produced += 64 * 1024;
        yield Buffer.alloc(64 * 1024, i);
      }
    }
    const packing = writer.file('big.bin', 64 * 64 * 1024, big(), signal);
    await new Promise((resolve) => setTimeout(resolve, 50));
    // Nothing read the output: the body was pulled only a few chunks ahead of it.
    expect(produced).toBeLessThanOrEqual(4 * 64 * 1024);
    let read = 0;
    writer.output.on('data', (chunk) => { read += (chunk as Buffer).length; });
    await packing;
    expect(produced).toBe(64 * 64 * 1024);
    expect(read).toBeGreaterThanOrEqual(64 * 64 * 1024);
  });

  test('an abort stops packing at once, without a trailer', async () => {
    const writer = new RelayTarWriter();
    const controller = new AbortController();
    async function* endless(): AsyncGenerator<Buffer> {
      for (;;) {
        yield Buffer.alloc(1024);
        controller.abort(new Error('relay over'));
      }
    }
    writer.output.on('data', () => {});
    await expect(writer.file('x', 1 << 20, endless(), controller.signal)).rejects.toThrow('relay over');
  });

  test('a size past 8 GiB (beyond the octal header field) goes through in the header', async () => {
    const size = 9 * 1024 ** 3;
    const p = pack();
    const header = new Promise<Header>((resolve) => {
      const parser = extract();
      parser.on('entry', (h) => resolve(h));
      p.on('data', (chunk) => parser.write(chunk));
    });
    p.entry(contentHeader('huge.img', size));
    expect(readEntryHeader(await header)).toEqual({ kind: 'file', path: 'huge.img', size });
    p.destroy();
  });

  test('entries that are not of the contract are breaches', () => {
    const base = contentHeader('a', 1);
    expect(() => readEntryHeader({ ...base, type: 'directory' })).toThrow(RelayBreach);
    expect(() => readEntryHeader({ ...base, pax: {} })).toThrow(/no xfer.kind/);
    expect(() => readEntryHeader({ ...trailerHeader('a', { sha256: 'a'.repeat(64) }), size: 3 })).toThrow(/not empty/);
    expect(() => readEntryHeader(trailerHeader('a', { sha256: 'not hex' }))).toThrow(/malformed xfer.sha256/);
    expect(readEntryHeader(trailerHeader('a', { error: 'x'.repeat(5000) }))).toEqual({ kind: 'sum', path: 'a', error: expect.stringMatching(/^x{1999}…$/) });
  });
});
