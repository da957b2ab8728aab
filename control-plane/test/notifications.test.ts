import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import type { Config } from '../src/config.js';
import { makeTestCertificate, type TestCertificate } from '../../e2e/src/tools/webhook-receiver.js';
import { SmtpReceiver } from '../../e2e/src/tools/smtp-receiver.js';
import { auth, buildTestApp, createAccount, createKey, expectError, settledDeliveries, type TestAccount } from './helper.js';
import { eventually } from './protocol-client.js';

/**
 * Notifications against real SMTP servers on loopback (the `smtp-server` package with a
 * self-signed certificate, trusted through the deliverer's test-only `transport.ca`; loopback
 * opened by the test-only allow-list) and the real database.
 */
const NOTIFY: Config['notifications'] = { timeoutMs: 3_000, retryWindowMs: 60_000, backoffBaseMs: 100, backoffMaxMs: 3600_000, pollMs: 50, unsafeAllowedAddresses: ['127.0.0.1/32'] };
/** The outbox fan-out runs in the webhook loop: polled often here. */
const WEBHOOKS: Config['webhooks'] = { timeoutMs: 2_000, retryWindowMs: 60_000, backoffBaseMs: 100, backoffMaxMs: 3600_000, pollMs: 50, unsafeAllowedAddresses: [] };
const PASSWORD = 'smtp-pass-Zq8vX3kP';

let cert: TestCertificate;
let starttls: SmtpReceiver;
let implicit: SmtpReceiver;
let app: App;
let owner: TestAccount;

const settingsFor = (receiver: SmtpReceiver, extra: Record<string, unknown> = {}, events = ['transfer.failed']) => ({
  email: {
    enabled: true,
    recipients: ['ops@example.test', 'oncall@example.test'],
    smtp: { host: '127.0.0.1', port: receiver.port, secure: receiver === implicit, ...(receiver === starttls ? { username: 'xfer', password: PASSWORD } : {}), ...extra },
    from: 'xfer@example.test',
  },
  events,
});

const put = (account: TestAccount, payload: unknown, on: App = app) =>
  on.inject({ method: 'PUT', url: '/api/v1/notifications/settings', headers: auth(account.apiKey), payload: payload as Record<string, unknown> });
const get = (account: TestAccount, url = '/api/v1/notifications/settings') => app.inject({ method: 'GET', url, headers: auth(account.apiKey) });
const sendTest = (account: TestAccount) => app.inject({ method: 'POST', url: '/api/v1/notifications/test', headers: auth(account.apiKey) });
/** Nothing more can be sent for the account (helper.ts settledDeliveries). */
const settled = (accountId: string, on: App = app) =>
  settledDeliveries(on, accountId, { deliveries: on.db.notificationDeliveries, attempts: on.db.notificationAttempts });

beforeAll(async () => {
  cert = makeTestCertificate({ dns: ['smtp.example.test'], ips: ['127.0.0.1'] });
  starttls = await SmtpReceiver.start({ cert, secure: false, users: { xfer: PASSWORD } });
  implicit = await SmtpReceiver.start({ cert, secure: true });
  app = await buildTestApp({ notifications: NOTIFY, webhooks: WEBHOOKS });
  app.notificationDeliverer.transport.ca = cert.cert;
  // Team: only its owner makes narrower keys; the other accounts are on the free plan (notifications need no plan).
  owner = await createAccount(app, 'team');
});
afterAll(async () => {
  await app?.close();
  await starttls?.stop();
  await implicit?.stop();
  cert?.remove();
});

describe('settings', () => {
  test('defaults before the first PUT; the password is write-only and sealed at rest', async () => {
    const fresh = await createAccount(app, 'free');
    expect((await get(fresh)).json()).toEqual({
      data: { email: { enabled: false, recipients: [], smtp: null, from: null }, events: [], digest: 'none', updated_at: null },
    });
    const res = await put(fresh, settingsFor(starttls));
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain(PASSWORD);
    const read = await get(fresh);
    expect(read.body).not.toContain(PASSWORD);
    expect(read.json().data).toEqual({
      email: {
        enabled: true, recipients: ['ops@example.test', 'oncall@example.test'], from: 'xfer@example.test',
        smtp: { host: '127.0.0.1', port: starttls.port, secure: false, username: 'xfer', has_password: true },
      },
      events: ['transfer.failed'], digest: 'none', updated_at: expect.any(String),
    });
    const raw = await app.db.notificationSettings.collection.findOne({ account_id: new Types.ObjectId(fresh.accountId) });
    expect(JSON.stringify(raw)).not.toContain(PASSWORD);
    expect(raw!.smtp_password).toMatchObject({ v: 2, kid: expect.any(String), data: expect.any(String) });

    // Omitted keeps it (same host and user); null removes it.
    const kept = await put(fresh, settingsFor(starttls, { password: undefined }));
    expect(kept.json().data.email.smtp.has_password).toBe(true);
    const removed = await put(fresh, settingsFor(starttls, { password: null }));
    expect(removed.json().data.email.smtp.has_password).toBe(false);
    const audit = await app.db.auditEvents.find({ account_id: new Types.ObjectId(fresh.accountId), action: 'notifications.settings.update' }).lean();
    expect(audit.map((a) => (a.details as { password: string }).password)).toEqual(['set', 'kept', 'removed']);
    expect(JSON.stringify(audit)).not.toContain(PASSWORD);
  });

  test.each([
    ['a port of 0', { smtp: { host: '127.0.0.1', port: 0, secure: false } }, /^body\.email\.smtp\.port /],
    ['a port above 65535', { smtp: { host: '127.0.0.1', port: 65536, secure: false } }, /^body\.email\.smtp\.port /],
    ['a recipient that is no address', { recipients: ['not-an-address'] }, /^body\.email\.recipients\.0 /],
    ['a sender that is no address', { from: 'xfer at example' }, /^body\.email\.from /],
    ['a host that is no host name', { smtp: { host: 'smtp example/test', port: 25, secure: false } }, 'email.smtp.host must be a host name or an IP address'],
    ['a private host', { smtp: { host: '10.1.2.3', port: 25, secure: false } }, /^email\.smtp\.host 10\.1\.2\.3 is /],
    ['localhost', { smtp: { host: 'localhost', port: 25, secure: false } }, 'email.smtp.host localhost is a loopback name'],
    ['a private address spelled in hex', { smtp: { host: '0x0a010203', port: 25, secure: false } }, /^email\.smtp\.host 10\.1\.2\.3 is /],
    ['an IPv6 loopback', { smtp: { host: '::1', port: 25, secure: false } }, /^email\.smtp\.host ::1 is /],
    ['a password without a username', { smtp: { host: '127.0.0.1', port: 25, secure: false, password: 'x' } }, 'email.smtp.password needs email.smtp.username'],
    ['an unknown field', { smtp: { host: '127.0.0.1', port: 25, secure: false, tls: false } }, /^body\.email\.smtp /],
    ['enabled without a server', { smtp: null }, 'email.smtp is required when email.enabled is true'],
    ['enabled without a recipient', { recipients: [] }, 'email.recipients must name at least one address when email.enabled is true'],
  ])('400 naming the field: %s', async (_what, change, message) => {
    const base = settingsFor(implicit);
    const res = await put(owner, { ...base, email: { ...base.email, ...change } });
    expectError(res, 400, message);
  });

  test('400 for an unknown event type and an unknown digest', async () => {
    expectError(await put(owner, settingsFor(implicit, {}, ['transfer.failed', 'transfer.exploded'])), 400, 'events contains unknown event type: transfer.exploded');
    expectError(await put(owner, { ...settingsFor(implicit), digest: 'weekly' }), 400, /^body\.digest /);
  });

  test('a stored password is never sent to another server: a new host, port, TLS mode or username needs it again', async () => {
    const account = await createAccount(app, 'free');
    expect((await put(account, settingsFor(starttls))).statusCode).toBe(200);
    const sealedBefore = (await app.db.notificationSettings.findOne({ account_id: account.accountId }).lean())!.smtp_password;
    // Restating the same server keeps the stored password.
    expect((await put(account, settingsFor(starttls, { password: undefined }))).statusCode).toBe(200);
    for (const [change, fields] of [
      [{ port: implicit.port }, 'email.smtp.port'],
      [{ secure: true }, 'email.smtp.secure'],
      [{ username: 'someone-else' }, 'email.smtp.username'],
      [{ port: implicit.port, secure: true }, 'email.smtp.port, email.smtp.secure'],
    ] as const) {
      expectError(await put(account, settingsFor(starttls, { password: undefined, ...change })), 400, `email.smtp.password must be given again when ${fields} changes`);
    }
    // Refused changes wrote nothing: the server and the sealed password are those of the first PUT.
    const after = (await app.db.notificationSettings.findOne({ account_id: account.accountId }).lean())!;
    expect([after.smtp_port, after.smtp_secure, after.smtp_username]).toEqual([starttls.port, false, 'xfer']);
    expect(after.smtp_password).toEqual(sealedBefore);
    // Given again, the move is taken.
    expect((await put(account, settingsFor(starttls, { port: implicit.port, password: 'new-secret' }))).statusCode).toBe(200);
  });

  test('scopes: notifications:read reads, notifications:write is needed to change or test', async () => {
    const reader = await createKey(app, owner.apiKey, ['notifications:read']);
    const asReader = { ...owner, apiKey: reader };
    expect((await get(asReader)).statusCode).toBe(200);
    expect((await get(asReader, '/api/v1/notifications/log')).statusCode).toBe(200);
    expectError(await put(asReader, settingsFor(implicit)), 403);
    expectError(await sendTest(asReader), 403);
  });
});

describe('email', () => {
  test('test message over STARTTLS with AUTH: envelope, headers and body; logged as sent', async () => {
    const account = await createAccount(app, 'free');
    await put(account, settingsFor(starttls));
    const before = starttls.mails.length;
    const res = await sendTest(account);
    expect(res.json().data).toEqual({ success: true, error: null, log_id: expect.any(String) });
    const mail = starttls.mails[before]!;
    expect(mail.secure).toBe(true);
    expect(mail.user).toBe('xfer');
    expect(mail.envelope).toEqual({ from: 'xfer@example.test', to: ['ops@example.test', 'oncall@example.test'] });
    expect(mail.subject).toBe('[xfer] Test notification');
    expect(mail.headers.get('x-xfer-event')).toBe('notification.test');
    expect(mail.headers.get('x-xfer-notification')).toBe(res.json().data.log_id);
    expect(mail.headers.get('auto-submitted')).toBe('auto-generated');
    expect(mail.text).toContain('Event: notification.test');
    expect(mail.raw).not.toContain(PASSWORD);
    const log = (await get(account, '/api/v1/notifications/log')).json();
    expect(log.data).toEqual([{
      id: res.json().data.log_id, event: 'notification.test', channel: 'email', recipients: ['ops@example.test', 'oncall@example.test'],
      status: 'sent', error: null, attempts: 1, created_at: expect.any(String), sent_at: expect.any(String),
    }]);
  });

  test('test message over implicit TLS without AUTH', async () => {
    const account = await createAccount(app, 'free');
    await put(account, settingsFor(implicit));
    const before = implicit.mails.length;
    expect((await sendTest(account)).json().data.success).toBe(true);
    expect(implicit.mails[before]).toMatchObject({ secure: true, user: null, envelope: { to: ['ops@example.test', 'oncall@example.test'] } });
  });

  test('a wrong password, a server without STARTTLS and an untrusted certificate fail, with the reason and no credential', async () => {
    const account = await createAccount(app, 'free');
    await put(account, settingsFor(starttls, { password: 'wrong-password-123' }));
    const denied = (await sendTest(account)).json().data;
    expect(denied.success).toBe(false);
    expect(denied.error).toMatch(/535|Invalid/);
    expect(denied.error).not.toContain('wrong-password-123');

    const plain = await SmtpReceiver.start({ cert, secure: false, noStartTls: true });
    try {
      await put(account, settingsFor(plain, { secure: false }));
      const refused = (await sendTest(account)).json().data;
      expect(refused.success).toBe(false);
      expect(refused.error).toMatch(/STARTTLS/i);
      expect(plain.mails).toHaveLength(0);
    } finally {
      await plain.stop();
    }

    const other = makeTestCertificate({ ips: ['127.0.0.1'] });
    const untrusted = await SmtpReceiver.start({ cert: other, secure: true });
    try {
      await put(account, settingsFor(untrusted, { secure: true }));
      const rejected = (await sendTest(account)).json().data;
      expect(rejected.success).toBe(false);
      expect(rejected.error).toMatch(/certificate/i);
      expect(untrusted.mails).toHaveLength(0);
    } finally {
      await untrusted.stop();
      other.remove();
    }
  });

  test('POST /notifications/test without settings is 400 naming what is missing', async () => {
    const account = await createAccount(app, 'free');
    expectError(await sendTest(account), 400, 'email.smtp is not set: PUT /notifications/settings first');
  });

  test('a failed transfer event becomes one email naming the transfer and its error; unselected events send nothing', async () => {
    const account = await createAccount(app, 'free');
    await put(account, settingsFor(implicit, {}, ['transfer.failed']));
    const id = String(new Types.ObjectId());
    const before = implicit.mails.length;
    await app.outbox.emit(account.accountId, 'transfer.completed', { id, files_transferred: 1, bytes_transferred: 1 });
    await app.outbox.emit(account.accountId, 'transfer.failed', { id, files_transferred: 0, bytes_transferred: 0, status: 'failed', error: 'bucket missing-bucket does not exist' });
    const mail = await eventually(async () => implicit.mails.slice(before).find((m) => m.headers.get('x-xfer-event') === 'transfer.failed'), 'the email');
    expect(mail.subject).toBe(`[xfer] Transfer failed: ${id} — bucket missing-bucket does not exist`);
    expect(mail.text).toContain(`id: ${id}`);
    expect(mail.text).toContain('error: bucket missing-bucket does not exist');
    await settled(account.accountId);
    expect(implicit.mails.slice(before)).toHaveLength(1);
    const log = (await get(account, '/api/v1/notifications/log')).json().data;
    expect(log).toMatchObject([{ event: 'transfer.failed', status: 'sent', attempts: 1 }]);
  });

  test('SMTP down: retried with backoff and sent once when it is back', async () => {
    const down = await SmtpReceiver.start({ cert, secure: true });
    const account = await createAccount(app, 'free');
    await put(account, settingsFor(down, { secure: true }));
    await down.stop();
    await app.outbox.emit(account.accountId, 'transfer.failed', { id: 'job-down', status: 'failed', error: 'boom' });
    const failing = await eventually(async () => {
      const [entry] = (await get(account, '/api/v1/notifications/log')).json().data;
      return entry?.attempts >= 2 && entry;
    }, 'two failed attempts');
    expect(failing).toMatchObject({ status: 'pending', error: expect.stringMatching(/ECONNREFUSED/) });
    await down.restart();
    // The server has the message before the attempt is recorded: the log is waited for, not read once.
    await eventually(async () => (await get(account, '/api/v1/notifications/log')).json().data[0]?.status === 'sent', 'sent after the server is back');
    await settled(account.accountId);
    const [entry] = (await get(account, '/api/v1/notifications/log')).json().data;
    expect(entry).toMatchObject({ status: 'sent', error: null });
    expect(down.mails).toHaveLength(1);
    await down.stop();
  });

  test('turned off meanwhile: what was pending is cancelled, not sent', async () => {
    const account = await createAccount(app, 'free');
    await put(account, settingsFor(implicit, { port: 1 }));
    await app.outbox.emit(account.accountId, 'transfer.failed', { id: 'job-off', status: 'failed', error: 'boom' });
    await eventually(async () => (await get(account, '/api/v1/notifications/log')).json().data[0]?.attempts >= 1, 'a failed attempt');
    await put(account, { ...settingsFor(implicit), email: { enabled: false } });
    await eventually(async () => (await get(account, '/api/v1/notifications/log')).json().data[0]?.status === 'cancelled', 'cancelled');
  });

  test('two instances on one database send each event once', async () => {
    const b = await buildTestApp({ notifications: NOTIFY, webhooks: app.config.webhooks, databaseName: app.config.databaseName, masterKeys: app.config.masterKeys });
    b.notificationDeliverer.transport.ca = cert.cert;
    try {
      const account = await createAccount(app, 'free');
      await put(account, settingsFor(implicit, {}, ['file.uploaded']));
      const before = implicit.mails.length;
      for (let i = 0; i < 10; i++) await app.outbox.emit(account.accountId, 'file.uploaded', { id: `file-${i}`, filename: `f${i}.txt` });
      await eventually(async () => implicit.mails.length - before >= 10, 'ten emails');
      await settled(account.accountId);
      const subjects = implicit.mails.slice(before).map((m) => m.subject).sort();
      expect(subjects).toEqual([...Array(10).keys()].map((i) => `[xfer] File uploaded: f${i}.txt`).sort());
    } finally {
      await b.close();
    }
  });
});

describe('hourly digest', () => {
  test("an ended hour's events become one email; the current hour's wait; nothing is sent twice", async () => {
    const account = await createAccount(app, 'free');
    await put(account, { ...settingsFor(implicit, {}, ['transfer.failed', 'file.uploaded']), digest: 'hourly' });
    const accountId = new Types.ObjectId(account.accountId);
    const hour = Math.floor(Date.now() / 3600_000) * 3600_000;
    const before = implicit.mails.length;
    // Events of the previous hour, written as the outbox writes them (with their time), and one of now.
    for (const [i, type] of (['transfer.failed', 'file.uploaded', 'transfer.completed'] as const).entries()) {
      await app.db.outboxEvents.create({ account_id: accountId, type, data: { id: `old-${i}`, error: type === 'transfer.failed' ? 'disk full' : undefined }, created_at: new Date(hour - 3600_000 + i * 60_000) });
    }
    await app.outbox.emit(account.accountId, 'file.uploaded', { id: 'this-hour', filename: 'now.txt' });
    const mail = await eventually(async () => implicit.mails.slice(before).find((m) => m.headers.get('x-xfer-event') === 'notification.digest'), 'the digest');
    const label = new Date(hour - 3600_000).toISOString().slice(0, 13).replace('T', ' ');
    expect(mail.subject).toBe(`[xfer] 2 events between ${label}:00 and ${label}:59 UTC`);
    expect(mail.text).toContain('Transfer failed: old-0 — disk full');
    expect(mail.text).toContain('File uploaded: old-1');
    expect(mail.text).not.toContain('old-2'); // not selected
    expect(mail.text).not.toContain('this-hour');
    await settled(account.accountId);
    expect(implicit.mails.slice(before)).toHaveLength(1);
    expect(await app.db.notificationDigestItems.countDocuments({ account_id: accountId, digest_id: null })).toBe(1);
    const log = (await get(account, '/api/v1/notifications/log')).json().data;
    expect(log).toMatchObject([{ event: 'notification.digest', status: 'sent' }]);
  });
});

describe('queueEmail (other senders, e.g. a workflow notify step)', () => {
  test('queues one email to the recipients, once per event id; null while email is off', async () => {
    const account = await createAccount(app, 'free');
    const eventId = new Types.ObjectId();
    const email = { eventId, event: 'workflow.notify', subject: '[xfer] partner file archived', text: 'archived: a.csv\n' };
    expect(await app.notificationDeliverer.queueEmail(account.accountId, email)).toBeNull();
    await put(account, settingsFor(implicit, {}, []));
    const before = implicit.mails.length;
    const id = await app.notificationDeliverer.queueEmail(account.accountId, email);
    expect(await app.notificationDeliverer.queueEmail(account.accountId, email)).toBe(id);
    const mail = await eventually(async () => implicit.mails.slice(before).find((m) => m.headers.get('x-xfer-notification') === id), 'the email');
    expect(mail).toMatchObject({ subject: '[xfer] partner file archived', text: 'archived: a.csv\n', envelope: { to: ['ops@example.test', 'oncall@example.test'] } });
    await settled(account.accountId);
    expect(implicit.mails.slice(before)).toHaveLength(1);
  });
});

describe('isolation', () => {
  test("another account's settings and log are its own", async () => {
    const a = await createAccount(app, 'free');
    const b = await createAccount(app, 'free');
    await put(a, settingsFor(implicit));
    await app.inject({ method: 'POST', url: '/api/v1/notifications/test', headers: auth(a.apiKey) });
    expect((await get(b)).json().data.email.smtp).toBeNull();
    expect((await get(b, '/api/v1/notifications/log')).json().data).toEqual([]);
    expect((await get(a, '/api/v1/notifications/log')).json().data).toHaveLength(1);
    expectError(await sendTest(b), 400, 'email.smtp is not set: PUT /notifications/settings first');
  });
});
