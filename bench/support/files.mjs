// Source trees for the benches: many small random files, one big random file (streamed, never whole in memory).
import { createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import { randomBytes, randomFillSync } from 'node:crypto';
import { dirname, join } from 'node:path';

/** Writes `count` files of `bytes` random bytes each below `root`, `perDir` to a directory (d0/f0.bin …). */
export function writeSmallFiles(root, count, bytes, perDir = 1000) {
  for (let i = 0; i < count; i++) {
    const dir = join(root, `d${Math.floor(i / perDir)}`);
    if (i % perDir === 0) mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `f${i}.bin`), randomBytes(bytes));
  }
}

/** Writes one file of `bytes` random bytes at `path`, 8 MiB at a time (never the whole file in memory). */
export async function writeBigFile(path, bytes) {
  mkdirSync(dirname(path), { recursive: true });
  await new Promise((resolve, reject) => {
    const out = createWriteStream(path);
    const chunk = Buffer.alloc(8 * 1024 * 1024);
    let left = bytes;
    const write = () => {
      while (left > 0) {
        const n = Math.min(chunk.length, left);
        randomFillSync(chunk, 0, n);
        left -= n;
        if (!out.write(Buffer.from(chunk.subarray(0, n)))) return void out.once('drain', write);
      }
      out.end();
    };
    out.on('finish', resolve).on('error', reject);
    write();
  });
}
