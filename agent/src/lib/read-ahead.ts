/**
 * `source` pulled up to `max` items ahead of its consumer. A merge of two listings
 * (copy/diff.ts `mergeListings`) pulls one side at a time, so without this each side waits idle
 * while the other's next page or directory is fetched: the S3 listing's next page and the SFTP
 * server's next READDIR are requested while the comparison works through what came. Memory: at
 * most `max` items held. An error of `source` reaches the consumer in order, after the items
 * before it; the consumer stopping early (`return`) stops the pulling and closes `source`.
 */
export async function* readAhead<T>(source: AsyncIterable<T>, max: number): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  const buffer: T[] = [];
  let ended = false;
  let failure: { error: unknown } | null = null;
  let stopped = false;
  /** Wakes the consumer (an item or the end arrived) or the puller (room freed). */
  let wakeConsumer: (() => void) | null = null;
  let wakePuller: (() => void) | null = null;
  const wake = (which: 'consumer' | 'puller') => {
    const fn = which === 'consumer' ? wakeConsumer : wakePuller;
    if (which === 'consumer') wakeConsumer = null;
    else wakePuller = null;
    fn?.();
  };

  const pulling = (async () => {
    try {
      while (!stopped) {
        if (buffer.length >= max) {
          await new Promise<void>((resolve) => { wakePuller = resolve; });
          continue;
        }
        const r = await it.next();
        if (r.done) break;
        buffer.push(r.value);
        wake('consumer');
      }
    } catch (error) {
      failure = { error };
    } finally {
      ended = true;
      wake('consumer');
    }
  })();

  try {
    for (;;) {
      if (buffer.length > 0) {
        const item = buffer.shift()!;
        wake('puller');
        yield item;
        continue;
      }
      if (ended) {
        if (failure) throw (failure as { error: unknown }).error;
        return;
      }
      await new Promise<void>((resolve) => { wakeConsumer = resolve; });
    }
  } finally {
    stopped = true;
    wake('puller');
    await pulling;
    if (!failure) await it.return?.(undefined);
  }
}
