import { randomBytes } from 'node:crypto';
import { startStack, type Stack } from '../src/stack.js';
import { downloadHash, keystream, rssMiB, uploadFile } from '../src/tools/file-transfer.js';

/**
 * Issue 5 acceptance: a 2 GiB file goes up (scanned by the real clamd while it streams) and comes
 * back byte-identical through the real `xfer-server` binary, and the control plane's memory does
 * not grow with the file (bench/files-upload-download.mjs prints the figures with a baseline).
 */
const GIB = 1024 ** 3;
const SIZE = 2 * GIB;
/** How far the server's peak RSS may rise above its warmed-up level: far below the file's size. */
const MAX_GROWTH_MIB = 200;

let stack: Stack;

beforeAll(async () => {
  if (!process.env.XFER_TEST_CLAMD) throw new Error('XFER_TEST_CLAMD is not set: run through `npm test` (it starts clamd)');
  stack = await startStack({ env: process.env, serverEnv: { XFER_CLAMD: process.env.XFER_TEST_CLAMD } });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

test('a 2 GiB upload and its download are byte-identical and keep the control plane RSS flat', async () => {
  const pid = stack.server.child.pid!;
  // Warm up the upload and download paths so lazily loaded code is not counted as growth.
  const warm = await uploadFile(stack.url, stack.api.token, { name: 'warm.bin', size: 4 << 20, content: keystream(4 << 20) });
  expect(warm.status).toBe(201);
  await downloadHash(`${stack.url}/files/${warm.body.data.id}/download`, stack.api.token);
  const before = rssMiB(pid).now;

  let peakDuring = 0;
  const sampler = setInterval(() => { peakDuring = Math.max(peakDuring, rssMiB(pid).now); }, 200);
  try {
    const seed = randomBytes(32);
    const up = await uploadFile(stack.url, stack.api.token, { name: 'big.bin', path: '/large', size: SIZE, content: keystream(SIZE, seed) });
    expect({ status: up.status, body: up.status === 201 ? 'ok' : up.body }).toEqual({ status: 201, body: 'ok' });
    expect(up.body.data).toMatchObject({ name: 'big.bin', path: '/large', size: SIZE, sha256: up.sha256 });

    const down = await downloadHash(`${stack.url}/files/${up.body.data.id}/download`, stack.api.token);
    expect({ status: down.status, bytes: down.bytes, sha256: down.sha256 }).toEqual({ status: 200, bytes: SIZE, sha256: up.sha256 });
  } finally {
    clearInterval(sampler);
  }
  const { peak } = rssMiB(pid);
  process.stderr.write(`files-large: control plane RSS ${before.toFixed(0)} MiB before, ${peakDuring.toFixed(0)} MiB sampled peak, ${peak.toFixed(0)} MiB VmHWM\n`);
  expect(peak - before).toBeLessThan(MAX_GROWTH_MIB);
}, 15 * 60_000);
