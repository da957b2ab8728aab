import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { ConnectorError, type ConnectorErrorCode, type Entry } from '../../src/connectors/types.js';

/**
 * A body of `total` random bytes in chunks of `chunkBytes` (odd sizes by default, so that
 * nothing lines up with a connector's request or part size), and the SHA-256 of what it
 * produced. Generated as it is read: a 64 MiB body never sits in memory.
 */
export function randomBody(total: number, chunkBytes = 65_521): { body: Readable; sha256: () => string } {
  const hash = createHash('sha256');
  let produced = 0;
  async function* chunks() {
    while (produced < total) {
      const n = Math.min(chunkBytes, total - produced);
      const chunk = randomBytes(n);
      hash.update(chunk);
      produced += n;
      yield chunk;
    }
  }
  let digest: string | undefined;
  return { body: Readable.from(chunks()), sha256: () => (digest ??= hash.digest('hex')) };
}

/**
 * A body that delivers `bytes` and then stalls without ending, as a slow or hung source does.
 * Resolves `delivered` once the consumer has taken them (the writes drained).
 */
export function stallingBody(bytes: number): { body: PassThrough; delivered: Promise<void> } {
  const body = new PassThrough({ highWaterMark: 256 * 1024 });
  const delivered = (async () => {
    let sent = 0;
    while (sent < bytes) {
      const chunk = randomBytes(Math.min(256 * 1024, bytes - sent));
      sent += chunk.length;
      if (!body.write(chunk)) await once(body, 'drain');
    }
  })();
  return { body, delivered };
}

/** A body that fails with `error` after `bytes`. */
export function failingBody(bytes: number, error: Error): Readable {
  async function* chunks() {
    yield randomBytes(bytes);
    throw error;
  }
  return Readable.from(chunks());
}

export function bodyOf(data: Buffer | string): Readable {
  return Readable.from([Buffer.from(data)]);
}

export async function collect(entries: AsyncIterable<Entry>): Promise<Entry[]> {
  const out: Entry[] = [];
  for await (const entry of entries) out.push(entry);
  return out;
}

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function sha256Of(stream: AsyncIterable<unknown>): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Rejects with a ConnectorError of `code` (and a message matching `message`), else fails the test. */
export async function expectCode(promise: Promise<unknown>, code: ConnectorErrorCode, message?: RegExp): Promise<ConnectorError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ConnectorError);
  const err = caught as ConnectorError;
  expect({ code: err.code, message: err.message }).toEqual({ code, message: message ? expect.stringMatching(message) : expect.any(String) });
  return err;
}

/** A 127.0.0.1 port where nothing listens (it was free a moment ago). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** A short random name for test directories and buckets. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}
