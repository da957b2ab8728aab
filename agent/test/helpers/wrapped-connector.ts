import { PassThrough, Transform, type Readable } from 'node:stream';
import type { Connector, Entry, WriteResult } from '../../src/connectors/types.js';

/**
 * A test-only wrapper around a real connector: every call goes to the real one, except the hooks
 * a test sets, which may change arguments or results, fail, or wait. Not a fake: the bytes land
 * on a real file system.
 */
export class WrappedConnector implements Connector {
  readonly type;
  readonly capabilities;
  /** Called before each write; may throw, wait, or return a transform the body goes through. */
  beforeWrite?: (path: string, signal?: AbortSignal) => Promise<Transform | void> | Transform | void;
  /** Changes a write's result (e.g. to report a store checksum). */
  afterWrite?: (path: string, result: WriteResult) => WriteResult | Promise<WriteResult>;
  /** Changes listed entries. */
  mapEntry?: (entry: Entry) => Entry;
  /** Called for each read (with its range, when one was asked); may throw or wrap the stream. */
  onRead?: (path: string, stream: Readable, range: { start?: number; end?: number }) => Readable;
  writesInFlight = 0;
  maxWritesInFlight = 0;
  listed = 0;

  constructor(private readonly inner: Connector, capabilities?: Connector['capabilities']) {
    this.type = inner.type;
    this.capabilities = capabilities ?? inner.capabilities;
  }

  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    for await (const entry of this.inner.list(path, options)) {
      this.listed++;
      yield this.mapEntry ? this.mapEntry(entry) : entry;
    }
  }

  async stat(path: string, options?: { signal?: AbortSignal }): Promise<Entry | null> {
    const entry = await this.inner.stat(path, options);
    return entry && this.mapEntry ? this.mapEntry(entry) : entry;
  }

  async read(path: string, options?: { start?: number; end?: number; signal?: AbortSignal }): Promise<Readable> {
    const stream = await this.inner.read(path, options);
    return this.onRead ? this.onRead(path, stream, { start: options?.start, end: options?.end }) : stream;
  }

  async write(path: string, body: Readable, options: { size?: number; signal?: AbortSignal }): Promise<WriteResult> {
    this.writesInFlight++;
    this.maxWritesInFlight = Math.max(this.maxWritesInFlight, this.writesInFlight);
    try {
      const transform = await this.beforeWrite?.(path, options.signal);
      let input: Readable = body;
      if (transform) {
        input = body.pipe(transform);
        body.on('error', (err) => transform.destroy(err));
      }
      const result = await this.inner.write(path, input, options);
      return this.afterWrite ? await this.afterWrite(path, result) : result;
    } finally {
      this.writesInFlight--;
    }
  }

  mkdir(path: string, options?: { signal?: AbortSignal }): Promise<void> {
    return this.inner.mkdir(path, options);
  }

  remove(path: string, options?: { signal?: AbortSignal }): Promise<void> {
    return this.inner.remove(path, options);
  }

  rename(from: string, to: string, options?: { signal?: AbortSignal }): Promise<void> {
    return this.inner.rename(from, to, options);
  }

  test(options?: { signal?: AbortSignal }): Promise<string> {
    return this.inner.test(options);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** A transform that flips one bit of the byte at `offset` (same size, different content). */
export function corruptByteAt(offset: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, callback) {
      if (offset >= seen && offset < seen + chunk.length) {
        const copy = Buffer.from(chunk);
        copy[offset - seen] = copy[offset - seen]! ^ 0x01;
        chunk = copy;
      }
      seen += chunk.length;
      callback(null, chunk);
    },
  });
}

export { PassThrough };
