import { randomBytes } from 'node:crypto';
import { ReadAtStream } from './read-at.js';
import { pipelinedWriteAt } from './write-at.js';

const collect = async (stream: AsyncIterable<unknown>) => {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};
const later = <T>(value: T, ms: number) => new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));

describe('ReadAtStream', () => {
  test('pushes the range in file order whatever order the READs answer in, never more than depth in flight', async () => {
    const file = randomBytes(100_000);
    let running = 0;
    let peak = 0;
    const stream = new ReadAtStream(10, 90_009, {
      chunkBytes: 4096,
      depth: 4,
      fail: (err) => err as Error,
      readAt: async (offset, length) => {
        running++;
        peak = Math.max(peak, running);
        const data = await later(file.subarray(offset, offset + length), Math.floor(Math.random() * 5));
        running--;
        return { data };
      },
    });
    expect((await collect(stream)).equals(file.subarray(10, 90_010))).toBe(true);
    expect(peak).toBeLessThanOrEqual(4);
  });

  test('a short read asks for the rest before anything later; an empty one ends the stream (the file shrank)', async () => {
    const file = randomBytes(10_000);
    const asked: [number, number][] = [];
    const shortened = file.subarray(0, 7_000);
    const stream = new ReadAtStream(0, 9_999, {
      chunkBytes: 1000,
      depth: 3,
      fail: (err) => err as Error,
      readAt: async (offset, length) => {
        asked.push([offset, length]);
        // The server caps every READ at 600 bytes.
        return { data: shortened.subarray(offset, offset + Math.min(length, 600)) };
      },
    });
    expect((await collect(stream)).equals(shortened)).toBe(true);
    expect(asked).toContainEqual([600, 400]);
  });

  test('eof with a short answer ends the stream there (NFS)', async () => {
    const file = randomBytes(2500);
    const stream = new ReadAtStream(0, 9_999, {
      chunkBytes: 1000,
      depth: 2,
      fail: (err) => err as Error,
      readAt: async (offset, length) => {
        const data = file.subarray(offset, offset + length);
        return { data, eof: offset + data.length >= file.length };
      },
    });
    expect((await collect(stream)).equals(file)).toBe(true);
  });

  test('a failed READ destroys the stream with fail(err); onClose runs exactly once', async () => {
    let closed = 0;
    const stream = new ReadAtStream(0, 9_999, {
      chunkBytes: 1000,
      depth: 2,
      fail: (err) => new Error(`mapped: ${(err as Error).message}`),
      onClose: () => closed++,
      readAt: async (offset, length) => {
        if (offset >= 3000) throw new Error('I/O error');
        return { data: Buffer.alloc(length) };
      },
    });
    await expect(collect(stream)).rejects.toThrow('mapped: I/O error');
    expect(closed).toBe(1);
  });

  test('an abort destroys the stream with fail(aborted())', async () => {
    const controller = new AbortController();
    const stream = new ReadAtStream(0, 9_999, {
      chunkBytes: 1000,
      depth: 2,
      signal: controller.signal,
      aborted: () => new Error('aborted'),
      fail: (err) => new Error(`read x: ${(err as Error).message}`),
      readAt: () => new Promise(() => undefined),
    });
    setTimeout(() => controller.abort(), 5);
    await expect(collect(stream)).rejects.toThrow('read x: aborted');
  });
});

describe('pipelinedWriteAt', () => {
  test('gathers small chunks into full requests at the right offsets, at most depth in flight', async () => {
    const data = randomBytes(50_000);
    const file = Buffer.alloc(data.length);
    const sizes: number[] = [];
    let running = 0;
    let peak = 0;
    async function* body() {
      for (let at = 0; at < data.length; at += 700) yield data.subarray(at, at + 700);
    }
    const written = await pipelinedWriteAt(body(), {
      chunkBytes: 4096,
      depth: 3,
      writeAt: async (chunk, offset) => {
        running++;
        peak = Math.max(peak, running);
        sizes.push(chunk.length);
        await later(undefined, Math.floor(Math.random() * 4));
        chunk.copy(file, offset);
        running--;
      },
    });
    expect(written).toBe(data.length);
    expect(file.equals(data)).toBe(true);
    expect(sizes.slice(0, -1).every((n) => n === 4096)).toBe(true);
    expect(peak).toBeLessThanOrEqual(3);
  });

  test('the first failed WRITE rejects the write, once every request has settled', async () => {
    let running = 0;
    async function* body() {
      for (let i = 0; i < 100; i++) yield Buffer.alloc(1000);
    }
    const write = pipelinedWriteAt(body(), {
      chunkBytes: 1000,
      depth: 4,
      writeAt: async (_chunk, offset) => {
        running++;
        await later(undefined, 2);
        running--;
        if (offset === 5000) throw new Error('disk full');
      },
    });
    await expect(write).rejects.toThrow('disk full');
    expect(running).toBe(0);
  });
});
