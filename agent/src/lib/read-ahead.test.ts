import { readAhead } from './read-ahead.js';

/** A source that records how far it was pulled, each item after a macrotask (as a page fetch). */
function counted(n: number, failAt?: number) {
  const state = { pulled: 0, closed: false };
  async function* gen(): AsyncGenerator<number> {
    try {
      for (let i = 0; i < n; i++) {
        await new Promise((resolve) => setImmediate(resolve));
        if (i === failAt) throw new Error(`failed at ${i}`);
        state.pulled++;
        yield i;
      }
    } finally {
      state.closed = true;
    }
  }
  return { state, source: gen() };
}

/** Resolves once `cond` holds, checking after each macrotask (bounded). */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !cond(); i++) await new Promise((resolve) => setImmediate(resolve));
  if (!cond()) throw new Error('condition never held');
}

describe('readAhead', () => {
  test('yields every item in order, pulling at most `max` ahead of the consumer', async () => {
    const { state, source } = counted(50);
    const it = readAhead(source, 5)[Symbol.asyncIterator]();
    expect((await it.next()).value).toBe(0);
    // The puller fills the buffer (5 held beyond what was taken) and stops there.
    await until(() => state.pulled === 6);
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(state.pulled).toBe(6);
    const rest: number[] = [];
    for (let r = await it.next(); !r.done; r = await it.next()) rest.push(r.value);
    expect(rest).toEqual(Array.from({ length: 49 }, (_, i) => i + 1));
    expect(state.closed).toBe(true);
  });

  test("a source's error reaches the consumer after the items before it", async () => {
    const { source } = counted(10, 4);
    const got: number[] = [];
    await expect((async () => { for await (const x of readAhead(source, 3)) got.push(x); })()).rejects.toThrow('failed at 4');
    expect(got).toEqual([0, 1, 2, 3]);
  });

  test('a consumer that stops early stops the pulling and closes the source', async () => {
    const { state, source } = counted(1000);
    for await (const x of readAhead(source, 10)) if (x === 2) break;
    expect(state.closed).toBe(true);
    expect(state.pulled).toBeLessThanOrEqual(14);
  });
});
