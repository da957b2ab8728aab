/**
 * Concurrent calls for one key share one run (parallel writes into one new directory make it
 * once); the map holds only what is in flight, so a later call runs again.
 */
export class SingleFlight<T> {
  private readonly running = new Map<string, Promise<T>>();

  run(key: string, fn: () => Promise<T>): Promise<T> {
    const running = this.running.get(key);
    if (running) return running;
    const started = fn().finally(() => this.running.delete(key));
    this.running.set(key, started);
    return started;
  }
}
