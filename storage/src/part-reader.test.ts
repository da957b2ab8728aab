import { randomBytes } from 'node:crypto';
import { PartReader } from './part-reader.js';

async function* chunksOf(data: Buffer, size: number) {
  for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
}

describe('PartReader', () => {
  test('cuts chunks of any size into parts of the sizes asked, without copying, and null at the end', async () => {
    const data = randomBytes(10_000);
    const reader = new PartReader(chunksOf(data, 700));
    const sizes = [4096, 4096, 4096, 4096];
    const parts = [];
    for (const size of sizes) parts.push(await reader.next(size));
    expect(parts.map((p) => p?.length ?? null)).toEqual([4096, 4096, 1808, null]);
    expect(Buffer.concat(parts.flatMap((p) => p?.chunks ?? [])).equals(data)).toBe(true);
    // The bytes are the source's own (subarrays), never a copy.
    expect(parts[0]!.chunks[0]!.buffer).toBe(data.buffer);
    await reader.close();
  });

  test('nextBuffer joins a part that spans chunks; strings and Uint8Arrays are taken as bytes', async () => {
    const reader = new PartReader((async function* () {
      yield 'abc';
      yield new Uint8Array([100, 101]);
      yield Buffer.from('fgh');
    })());
    expect((await reader.nextBuffer(4))?.toString()).toBe('abcd');
    expect((await reader.nextBuffer(10))?.toString()).toBe('efgh');
    expect(await reader.nextBuffer(1)).toBeNull();
  });

  test('close ends a source not read to its end', async () => {
    let finished = false;
    const reader = new PartReader((async function* () {
      try {
        for (;;) yield Buffer.alloc(100);
      } finally {
        finished = true;
      }
    })());
    await reader.next(150);
    await reader.close();
    expect(finished).toBe(true);
  });
});
