import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, type Stack } from '../src/stack.js';
import { SmtpReceiver, type ReceivedMail } from '../src/tools/smtp-receiver.js';
import { makeTestCertificate, type TestCertificate } from '../src/tools/webhook-receiver.js';
import { cliEnv, jsonOf, startCli, type CliRun } from './support/cli.js';
import { sftpAndS3, waitFor } from './support/stack-helpers.js';

/**
 * The notifications acceptance of issue 16 with the real binaries: `xfer-server` (loopback opened
 * for SMTP only by XFER_UNSAFE_SMTP_ALLOW, the SMTP server's self-signed certificate trusted
 * through NODE_EXTRA_CA_CERTS, short backoff), a real agent, and a real SMTP server on loopback
 * (STARTTLS, AUTH). Settings are made with the CLI. A transfer to a bucket that does not exist
 * fails: one email names it and its error. Then the SMTP server is down for 60 s while another
 * transfer fails: the email arrives once it is back, once.
 */
const env = process.env;
const run = randomBytes(3).toString('hex');
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-notify-${run}`);
const PASSWORD = `smtp-${randomBytes(8).toString('hex')}`;

let cert: TestCertificate;
let smtp: SmtpReceiver;
let stack: Stack;
let home: string;
let ids: { sftp: string; s3: string };

const xfer = (args: string[], input?: string): Promise<CliRun> =>
  startCli(args, { env: cliEnv(home, { XFER_URL: stack.url, XFER_API_KEY: stack.api.token }), ...(input !== undefined && { input }) });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const failedMails = (id: string) => smtp.mails.filter((m) => m.headers.get('x-xfer-event') === 'transfer.failed' && m.text.includes(`id: ${id}`));

beforeAll(async () => {
  cert = makeTestCertificate({ dns: ['smtp.e2e.test'], ips: ['127.0.0.1'] });
  smtp = await SmtpReceiver.start({ cert, secure: false, users: { xfer: PASSWORD } });
  home = mkdtempSync(join(tmpdir(), 'xfer-e2e-notify-home-'));
  mkdirSync(join(sftpRoot, 'src'), { recursive: true });
  writeFileSync(join(sftpRoot, 'src', 'a.txt'), `notify ${run}\n`);
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  stack = await startStack({
    env,
    serverEnv: {
      XFER_UNSAFE_SMTP_ALLOW: '127.0.0.1/32',
      NODE_EXTRA_CA_CERTS: cert.certPath,
      XFER_SMTP_TIMEOUT_MS: '2000',
      XFER_NOTIFY_BACKOFF_BASE_MS: '200',
      XFER_NOTIFY_BACKOFF_MAX_MS: '5000',
      XFER_NOTIFY_POLL_MS: '100',
      XFER_WEBHOOK_POLL_MS: '100',
    },
  });
  await stack.startAgent(`e2e-notify-agent-${run}`);
  // The bucket is never made: every transfer to it fails.
  ids = await sftpAndS3(stack, `notify ${run}`, sftpRoot, `e2e-notify-missing-${run}`);

  const set = await xfer(['notifications', 'settings', 'set', '--enable', '--smtp-host', '127.0.0.1', '--smtp-port', String(smtp.port), '--smtp-tls', 'starttls',
    '--smtp-username', 'xfer', '--smtp-password-stdin', '--from', 'xfer@e2e.test', '--recipient', 'ops@e2e.test', '--recipient', 'lead@e2e.test',
    '--event', 'transfer.failed', '--json'], PASSWORD);
  if (set.status !== 0) throw new Error(`notifications settings set: ${set.status} ${set.stderr}`);
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await smtp?.stop();
  cert?.remove();
  rmSync(sftpRoot, { recursive: true, force: true });
  if (home) rmSync(home, { recursive: true, force: true });
}, 60_000);

/** A transfer to the missing bucket, run until it has failed; its id, name and error. */
async function failingTransfer(name: string): Promise<{ id: string; name: string; error: string }> {
  const job = await stack.api.data('POST', '/transfers', {
    name, sourceConnectionId: ids.sftp, sourcePath: '/src', destinationConnectionId: ids.s3, destinationPath: '/out',
  });
  await stack.api.call('POST', `/transfers/${job.id}/execute`);
  const done = await waitFor('the transfer to fail', () => stack.api.data('GET', `/transfers/${job.id}`), (t: { status: string; error: string }) => t.status === 'failed', 120_000);
  return { id: job.id, name, error: done.error };
}

test('settings through the CLI: the password is never shown; a test email arrives over STARTTLS with AUTH', async () => {
  const shown = await xfer(['notifications', 'settings', 'get', '--json']);
  expect(shown.stdout).not.toContain(PASSWORD);
  expect(jsonOf(shown)).toMatchObject({
    email: { enabled: true, recipients: ['ops@e2e.test', 'lead@e2e.test'], from: 'xfer@e2e.test', smtp: { host: '127.0.0.1', port: smtp.port, secure: false, username: 'xfer', has_password: true } },
    events: ['transfer.failed'], digest: 'none',
  });
  const tested = jsonOf(await xfer(['notifications', 'test', '--json']));
  expect(tested).toMatchObject({ success: true, error: null });
  const mail = smtp.mails.find((m) => m.headers.get('x-xfer-notification') === tested.log_id) as ReceivedMail;
  expect(mail).toMatchObject({ secure: true, user: 'xfer', envelope: { from: 'xfer@e2e.test', to: ['ops@e2e.test', 'lead@e2e.test'] }, subject: '[xfer] Test notification' });
}, 60_000);

test('a failing transfer → one email naming the job and its error', async () => {
  const job = await failingTransfer(`nightly export ${run}`);
  expect(job.error).toBeTruthy();
  const [mail] = await waitFor('the email', async () => failedMails(job.id), (m) => m.length >= 1, 30_000);
  expect(mail!.subject).toContain(job.name);
  expect(mail!.subject).toContain('Transfer failed');
  expect(mail!.text).toContain(`name: ${job.name}`);
  expect(mail!.text).toContain(`error: ${job.error}`);
  expect(mail!.envelope.to).toEqual(['ops@e2e.test', 'lead@e2e.test']);
  expect(mail!.raw).not.toContain(PASSWORD);
  // Sent is final (no attempt follows it): once the log says so, the server has all it will get.
  const log = await waitFor('the notification marked sent',
    async () => jsonOf<Array<{ event: string; status: string }>>(await xfer(['notifications', 'log', '--json'])), (l) => l[0]?.status === 'sent', 30_000);
  expect(log[0]).toMatchObject({ event: 'transfer.failed', status: 'sent' });
  expect(failedMails(job.id)).toHaveLength(1);
}, 180_000);

test('SMTP down for 60 s → the email is delivered after it returns, once', async () => {
  await smtp.stop();
  const job = await failingTransfer(`while smtp is down ${run}`);
  // The outage itself lasts 60 s (the scenario, not a wait for an outcome).
  await sleep(60_000);
  const log = jsonOf<Array<{ event: string; status: string; attempts: number; error: string | null }>>(await xfer(['notifications', 'log', '--status', 'pending', '--json']));
  expect(log).toHaveLength(1);
  expect(log[0]!.attempts).toBeGreaterThanOrEqual(2);
  expect(log[0]!.error).toMatch(/ECONNREFUSED/);
  expect(failedMails(job.id)).toHaveLength(0);

  await smtp.restart();
  // The next attempt comes within XFER_NOTIFY_BACKOFF_MAX_MS (5 s here) of the server's return.
  const sent = await waitFor('the notification sent after the server is back',
    async () => jsonOf<Array<{ status: string; attempts: number }>>(await xfer(['notifications', 'log', '--limit', '1', '--json'])),
    (log) => log[0]?.status === 'sent', 120_000);
  expect(sent[0]!.attempts).toBeGreaterThan(log[0]!.attempts);
  // Sent is final (no attempt follows it), and the server got it once.
  expect(failedMails(job.id)).toHaveLength(1);
}, 360_000);
