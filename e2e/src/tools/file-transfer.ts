import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { Readable } from 'node:stream';

/**
 * Big-file helpers for e2e tests and benchmarks of the service's own file store: content made on
 * the fly (never held in memory), a streamed multipart upload with a known length, a streamed
 * download hashed as it arrives, and the RSS figures of a process.
 */

/**
 * `size` bytes of incompressible, reproducible content (an AES-256-CTR keystream of `seed`), made
 * as it is read: the same seed gives the same bytes, so a test can check a download without
 * keeping the upload.
 */
export function keystream(size: number, seed: Buffer = randomBytes(32), chunkBytes = 1024 * 1024): Readable {
  const cipher = createCipheriv('aes-256-ctr', seed, Buffer.alloc(16));
  const zeros = Buffer.alloc(chunkBytes);
  let left = size;
  return new Readable({
    highWaterMark: chunkBytes,
    read() {
      if (left === 0) return void this.push(null);
      const n = Math.min(left, chunkBytes);
      left -= n;
      this.push(cipher.update(n === chunkBytes ? zeros : zeros.subarray(0, n)));
    },
  });
}

export interface UploadResult {
  status: number;
  body: any;
  /** SHA-256 (hex) of the file bytes sent. */
  sha256: string;
}

/**
 * `POST <baseUrl>/files/upload` as a browser form would send it: a `path` part, then the `file`
 * part streamed from `content` with an exact Content-Length (no chunked encoding).
 */
export async function uploadFile(
  baseUrl: string, token: string,
  file: { name: string; path?: string; size: number; content: Readable; contentType?: string },
): Promise<UploadResult> {
  const boundary = `----xfer-${randomBytes(12).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="path"\r\n\r\n${file.path ?? '/'}\r\n` +
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.name}"\r\n` +
    `Content-Type: ${file.contentType ?? 'application/octet-stream'}\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const hash = createHash('sha256');
  const url = new URL(`${baseUrl}/files/upload`);
  return new Promise<UploadResult>((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(head.length + file.size + tail.length),
      },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null, sha256: hash.digest('hex') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.write(head);
    file.content.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      if (!req.write(chunk)) {
        file.content.pause();
        req.once('drain', () => file.content.resume());
      }
    });
    file.content.on('error', (err) => req.destroy(err));
    file.content.on('end', () => req.end(tail));
  });
}

/** Downloads `url` (GET, bearer `token` unless null) hashing the body as it arrives; nothing is kept. */
export async function downloadHash(url: string, token: string | null): Promise<{ status: number; bytes: number; sha256: string; headers: Headers }> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { status: res.status, bytes, sha256: hash.digest('hex'), headers: res.headers };
}

/** A process's resident set now and at its peak (VmRSS, VmHWM of /proc/<pid>/status), in MiB. */
export function rssMiB(pid: number): { now: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
  return { now: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}
