import { renderEmail, subjectLine } from './message.js';

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

test('no control character of a name reaches the subject, and in the body each is shown escaped: a value never forges a line', () => {
  const name = 'report\u0000.csv\r\nBcc: victim@example.test\u000b\u0085\u2028<b>x</b>';
  const { subject, text } = renderEmail('file.uploaded', at, { filename: name, room: 'a\nstatus: completed' });
  expect(subject).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/);
  expect(subject).toBe('[xfer] File uploaded: report .csv Bcc: victim@example.test <b>x</b>');
  expect(text).toContain('filename: report\\u0000.csv\\u000d\\u000aBcc: victim@example.test\\u000b\\u0085\\u2028<b>x</b>\n');
  expect(text).toContain('room: a\\u000astatus: completed\n');
  expect(text.split('\n').filter((l) => l.startsWith('status:'))).toEqual([]);
  expect(subjectLine('\t a \r\n b ')).toBe('a b');
});
