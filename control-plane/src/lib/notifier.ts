/**
 * In-process wake-ups keyed by id: a waiter sleeps until `notify(key)`, its timeout or its
 * signal, whichever comes first. Only ever a shortcut: waiters re-read the database after every
 * wake-up and also wake on their timeout, because the change may happen on another instance.
 */
export class Notifier {
  private readonly waiters = new Map<string, Set<() => void>>();

  notify(key: string): void {
    const set = this.waiters.get(key);
    if (!set) return;
    this.waiters.delete(key);
    for (const wake of set) wake();
  }

  wait(key: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      let set = this.waiters.get(key);
      if (!set) this.waiters.set(key, (set = new Set()));
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        const current = this.waiters.get(key);
        current?.delete(done);
        if (current?.size === 0) this.waiters.delete(key);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done, { once: true });
      set.add(done);
    });
  }
}
