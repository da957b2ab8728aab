import { PassThrough, Readable } from 'node:stream';
import { guardWrite } from './write-guard.js';

const stalled = () => new PassThrough();

describe('guardWrite', () => {
  test('an aborted signal refuses the write before it starts, destroying the body', async () => {
    const body = stalled();
    const controller = new AbortController();
    controller.abort();
    let ran = false;
    await expect(guardWrite(body, { signal: controller.signal, aborted: () => new Error('aborted') }, async () => { ran = true; })).rejects.toThrow('aborted');
    expect(ran).toBe(false);
    expect(body.destroyed).toBe(true);
  });

  test('an abort while the body stalls ends the write with aborted(), destroys the body and cleans up', async () => {
    const body = stalled();
    body.write(Buffer.from('some'));
    const controller = new AbortController();
    const cleaned: unknown[] = [];
    const write = guardWrite(body, { signal: controller.signal, aborted: () => new Error('write x: aborted'), cleanup: async (err) => void cleaned.push(err) }, async () => {
      for await (const _chunk of body) {
        // reads until the body ends or is destroyed
      }
    });
    setTimeout(() => controller.abort(), 10);
    await expect(write).rejects.toThrow('write x: aborted');
    expect(body.destroyed).toBe(true);
    expect(cleaned).toHaveLength(1);
  });

  test("the body's own error reaches run through its iteration, mapped by mapError; cleanup runs, its failure ignored", async () => {
    const failure = new Error('client went away');
    const body = new Readable({ read() { this.destroy(failure); } });
    const write = guardWrite(body, { aborted: () => new Error('aborted'), mapError: (err) => new Error(`mapped: ${(err as Error).message}`), cleanup: () => Promise.reject(new Error('cleanup failed')) }, async () => {
      for await (const _chunk of body) {
        // never yields
      }
    });
    await expect(write).rejects.toThrow('mapped: client went away');
  });

  test('an error of the body before run reads it is not an unhandled error event', async () => {
    const body = stalled();
    const result = guardWrite(body, { aborted: () => new Error('aborted') }, async () => {
      body.emit('error', new Error('early'));
      return 'done';
    });
    await expect(result).resolves.toBe('done');
    expect(body.listenerCount('error')).toBe(0);
  });

  test('destroyWithAbort false destroys the body plainly; abortTarget names the stream an abort destroys', async () => {
    const body = stalled();
    const source = stalled();
    const controller = new AbortController();
    const write = guardWrite(body, { signal: controller.signal, aborted: () => new Error('aborted'), destroyWithAbort: false, abortTarget: source }, () =>
      new Promise((_resolve, reject) => source.on('close', () => reject(new Error('source closed')))));
    controller.abort();
    await expect(write).rejects.toThrow('aborted');
    expect(source.destroyed).toBe(true);
    expect(source.errored).toBeNull();
    expect(body.destroyed).toBe(true);
  });
});
