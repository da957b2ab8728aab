import { InflightWindow } from './inflight-window.js';

/** A request the test settles by hand. */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('InflightWindow', () => {
  test('bound: slot() waits while `limit` requests run and resolves as soon as one ends', async () => {
    const window = new InflightWindow(2);
    const a = deferred();
    const b = deferred();
    window.add(a.promise);
    window.add(b.promise);
    expect(window.size).toBe(2);
    let free = false;
    const waiting = window.slot().then(() => (free = true));
    await tick();
    expect(free).toBe(false);
    b.resolve();
    await waiting;
    expect(free).toBe(true);
    expect(window.size).toBe(1);
    a.resolve();
    await window.drain();
    expect(window.size).toBe(0);
  });

  test('never more than `limit` in flight when every request goes through slot()', async () => {
    const window = new InflightWindow(3);
    let running = 0;
    let peak = 0;
    for (let i = 0; i < 20; i++) {
      await window.slot();
      running++;
      peak = Math.max(peak, running);
      window.add(new Promise<void>((resolve) => setTimeout(() => { running--; resolve(); }, 1 + (i % 4))));
    }
    await window.drain();
    expect(peak).toBe(3);
    expect(running).toBe(0);
  });

  test('order: results reach onDone in the order the requests end, each with its own value', async () => {
    const window = new InflightWindow(4);
    const done: number[] = [];
    const requests = [deferred<number>(), deferred<number>(), deferred<number>()];
    requests.forEach((r) => window.add(r.promise, (n) => done.push(n)));
    requests[2]!.resolve(3);
    requests[0]!.resolve(1);
    await tick();
    requests[1]!.resolve(2);
    await window.drain();
    expect(done).toEqual([3, 1, 2]);
  });

  test('error propagation: the first failure is thrown by slot, check and drain; later ones are not reported', async () => {
    const window = new InflightWindow(2);
    const a = deferred();
    const b = deferred();
    window.add(a.promise);
    window.add(b.promise);
    const first = new Error('first');
    const waiting = window.slot();
    a.reject(first);
    await expect(waiting).rejects.toBe(first);
    b.reject(new Error('second'));
    await expect(window.drain()).rejects.toBe(first);
    expect(() => window.check()).toThrow(first);
    expect(window.failed).toBe(true);
  });

  test('a failure while waiting ends the wait at once, even with every slot still taken', async () => {
    const window = new InflightWindow(1);
    const failing = deferred();
    window.add(failing.promise);
    const stalled = deferred();
    const waiting = window.slot();
    failing.reject(new Error('refused'));
    await expect(waiting).rejects.toThrow('refused');
    window.add(stalled.promise);
    await expect(window.slot()).rejects.toThrow('refused');
    stalled.resolve();
  });

  test('abort: requests cut by a signal fail the window with the abort, and settle() waits for all without throwing', async () => {
    const controller = new AbortController();
    const window = new InflightWindow(3);
    const ended: number[] = [];
    const request = (n: number, signal: AbortSignal) =>
      new Promise<void>((_resolve, reject) => {
        signal.addEventListener('abort', () => setTimeout(() => { ended.push(n); reject(signal.reason); }, n), { once: true });
      });
    for (const n of [1, 5, 10]) window.add(request(n, controller.signal));
    const reason = new Error('cancelled');
    controller.abort(reason);
    await window.settle();
    expect(ended.sort((x, y) => x - y)).toEqual([1, 5, 10]);
    expect(window.size).toBe(0);
    await expect(window.drain()).rejects.toBe(reason);
  });

  test('a rejected request is never an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on('unhandledRejection', onUnhandled);
    try {
      const window = new InflightWindow(2);
      window.add(Promise.reject(new Error('a')));
      window.add(Promise.reject(new Error('b')));
      await window.settle();
      await tick();
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
