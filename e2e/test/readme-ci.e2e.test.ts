import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { startStack, type Stack } from '../src/stack.js';
import { cliEnv, installXfer } from './support/cli.js';
import { digestBucket, s3Client, treeDiff, writeRandomFile, type Digests } from './support/trees.js';

/**
 * The CI script of README.md ("In a CI pipeline"), taken from the README itself and run with
 * bash as a pipeline would, `xfer` on the PATH, against the real binaries and servers (sftp → s3
 * through a real agent): it must copy the files and exit 0, and fail the pipeline with its
 * message for a failed transfer (7), a refused key (3) and an unknown connection (4).
 */
const env = process.env;
const README = resolve(dirname(fileURLToPath(import.meta.url)), '../../README.md');
const run = randomBytes(4).toString('hex');
const bucket = `readme-ci-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `readme-ci-${run}`);
const source = `build-${run}`;
const dest = `releases-${run}`;

let stack: Stack;
let s3: S3Client;
let work: string;
let bin: string;
let script: string;
const expected: Digests = new Map();

/** The bash block right after the `<!-- ci-example -->` marker. */
function readmeScript(): string {
  const text = readFileSync(README, 'utf8');
  const m = /<!-- ci-example -->\n```bash\n([\s\S]*?)\n```/.exec(text);
  if (!m) throw new Error('README.md has no ```bash block after <!-- ci-example -->');
  return m[1]!;
}

function pipeline(vars: Record<string, string>) {
  const res = spawnSync('bash', [script], {
    cwd: work,
    env: cliEnv(join(work, 'home'), {
      PATH: `${bin}:${env.PATH}`, XFER_URL: stack.url, XFER_API_KEY: stack.api.token, XFER_SOURCE: source, XFER_DEST: dest, CI_PIPELINE_ID: run,
      ...vars,
    }),
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'xfer-readme-ci-'));
  mkdirSync(join(work, 'home'));
  // `xfer` as an installed CLI would be: a command on the PATH.
  bin = installXfer(work);
  script = join(work, 'ci.sh');
  writeFileSync(script, readmeScript());

  for (const name of ['app.tar.gz', 'checksums.txt', 'docs/index.html']) {
    expected.set(name, await writeRandomFile(join(sftpRoot, 'build', name), 100_000 + randomBytes(2).readUInt16BE()));
  }
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  s3 = s3Client(env);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  stack = await startStack({ env });
  await stack.startAgent('readme-ci-agent');
  await stack.api.data('POST', '/connections', {
    name: source, type: 'sftp', host: env.XFER_TEST_SFTP_HOST, port: Number(env.XFER_TEST_SFTP_PORT), path: sftpRoot,
    credentials: { username: env.XFER_TEST_SFTP_USER, password: env.XFER_TEST_SFTP_PASSWORD },
  });
  await stack.api.data('POST', '/connections', {
    name: dest, type: 's3', host: env.XFER_TEST_S3_HOST, port: Number(env.XFER_TEST_S3_PORT), path: `/${bucket}`,
    options: { secure: false, force_path_style: true },
    credentials: { access_key_id: env.XFER_TEST_S3_ACCESS_KEY, secret_access_key: env.XFER_TEST_S3_SECRET_KEY },
  });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(sftpRoot, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

test('copies the build to the destination and exits 0, writing no credentials anywhere', () => {
  const res = pipeline({ SOURCE_PATH: '/build', DEST_PATH: `/releases/${run}` });
  expect({ status: res.status, stderr: res.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
  expect(res.stdout).toContain('xfer: transfer complete');
  expect(res.stdout).toContain('completed');
  expect(readdirSync(join(work, 'home'))).toEqual([]);
}, 120_000);

test('the copied files are byte-identical at the destination', async () => {
  const copied = await digestBucket(s3, bucket, `releases/${run}`);
  expect(treeDiff(expected, copied.files)).toEqual([]);
}, 60_000);

test('a failed transfer fails the pipeline with exit 7, the reason and the script\'s line', async () => {
  const res = pipeline({ SOURCE_PATH: '/no-such-dir' });
  expect(res.status).toBe(7);
  const lines = res.stderr.split('\n').filter(Boolean);
  expect(lines.at(-1)).toBe('xfer: the transfer failed (reason above)');
  expect(lines.at(-2)).toMatch(/^Error: .*no-such-dir/);
  const jobs = await stack.api.data('GET', '/transfers?status=failed');
  expect(jobs.map((j: { name: string }) => j.name)).toContain(`ci-${run}`);
}, 120_000);

test('a refused key exits 3 and an unknown connection 4, each with its line', () => {
  const refused = pipeline({ XFER_API_KEY: `svc_${randomBytes(16).toString('hex')}` });
  expect(refused.status).toBe(3);
  expect(refused.stderr.split('\n').filter(Boolean).at(-1)).toBe('xfer: the API key was refused (expired, revoked, or missing a scope)');
  const unknown = pipeline({ XFER_DEST: 'no-such-connection' });
  expect(unknown.status).toBe(4);
  expect(unknown.stderr).toContain('xfer: a connection named in XFER_SOURCE or XFER_DEST does not exist');
  const unset = pipeline({ XFER_SOURCE: '' });
  expect(unset.status).not.toBe(0);
  expect(unset.stderr).toContain('set XFER_SOURCE');
}, 120_000);
