import type { Stack } from '../../src/stack.js';

/** Polls `get` until `ok` holds; throws with the last value after `timeoutMs`. */
export async function waitFor<T>(what: string, get: () => Promise<T>, ok: (value: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await get();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: last ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * An sftp connection on the test sshd (base path `sftpRoot`) and an s3 connection on the test
 * versitygw (bucket `bucket`, which must exist), made through the stack's API.
 */
export async function sftpAndS3(stack: Stack, name: string, sftpRoot: string, bucket: string): Promise<{ sftp: string; s3: string }> {
  const env = process.env;
  const sftp = (await stack.api.data('POST', '/connections', {
    name: `${name} sftp`, type: 'sftp', host: env.XFER_TEST_SFTP_HOST, port: Number(env.XFER_TEST_SFTP_PORT), path: sftpRoot,
    credentials: { username: env.XFER_TEST_SFTP_USER, password: env.XFER_TEST_SFTP_PASSWORD },
  })).id as string;
  const s3 = (await stack.api.data('POST', '/connections', {
    name: `${name} s3`, type: 's3', host: env.XFER_TEST_S3_HOST, port: Number(env.XFER_TEST_S3_PORT), path: `/${bucket}`,
    options: { secure: false, force_path_style: true },
    credentials: { access_key_id: env.XFER_TEST_S3_ACCESS_KEY, secret_access_key: env.XFER_TEST_S3_SECRET_KEY },
  })).id as string;
  return { sftp, s3 };
}
