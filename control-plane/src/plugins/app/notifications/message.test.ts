import { renderEmail } from './message.js';

const at = new Date('2026-11-26T22:00:00.000Z');

test('a failed transfer: the subject names the transfer and its error, the body every field', () => {
  const { subject, text } = renderEmail('transfer.failed', at, { name: 'nightly export', id: 'abc', status: 'failed', error: 'bucket gone', files_transferred: 0 });
  expect(subject).toBe('[xfer] Transfer failed: nightly export — bucket gone');
  expect(text).toContain('Event: transfer.failed\nTime:  2026-11-26T22:00:00.000Z\n');
  expect(text).toContain('name: nightly export\nid: abc\nstatus: failed\nerror: bucket gone\nfiles_transferred: 0\n');
});

test('a subject is one line and bounded, whatever the data holds', () => {
  const { subject } = renderEmail('workflow.failed', at, { workflow_name: 'a\r\nBcc: victim@example.test', error: 'x'.repeat(500) });
  expect(subject).not.toMatch(/[\r\n]/);
  expect(subject.length).toBeLessThanOrEqual(160);
  expect(subject.startsWith('[xfer] Workflow failed: a Bcc: victim@example.test — x')).toBe(true);
});

test('an event without a title or a name is named by its type; nested data is JSON', () => {
  const { subject, text } = renderEmail('user.login', at, { user: { email: 'a@example.test' } });
  expect(subject).toBe('[xfer] user.login');
  expect(text).toContain('user: {"email":"a@example.test"}');
});
