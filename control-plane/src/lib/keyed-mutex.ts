/**
 * Runs async sections one at a time per key, in call order. The control plane serializes its own
 * writes to one job or one agent document with it: FerretDB 1.24 applies an update by reading the
 * document and writing it back whole, so two concurrent updates of one document (even of different
 * fields, even conditional ones) can lose one of them. MongoDB needs no help; FerretDB is the
 * embedded, single-instance database, where this in-process order is all that is needed.
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, section: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    this.tails.set(key, tail);
    await previous;
    try {
      return await section();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
