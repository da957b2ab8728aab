/** Longest subject line (the rest of a long name or error is in the body). */
const SUBJECT_MAX_CHARS = 160;
/** Longest value shown per field in the body. */
const VALUE_MAX_CHARS = 2000;

/** Human titles of the events whose subject says more than the type. */
const TITLES: Record<string, string> = {
  'transfer.started': 'Transfer started',
  'transfer.completed': 'Transfer completed',
  'transfer.failed': 'Transfer failed',
  'file.uploaded': 'File uploaded',
  'file.downloaded': 'File downloaded',
  'file.deleted': 'File deleted',
  'file.shared': 'File shared',
  'file.scan_blocked': 'Upload blocked by the malware scan',
  'workflow.notify': 'Workflow notification',
  'workflow.completed': 'Workflow completed',
  'workflow.failed': 'Workflow failed',
  'notification.test': 'Test notification',
};

/**
 * Control characters, C1 controls and the Unicode line and paragraph separators: what could end
 * a header line or forge one in a plain-text body (docs/security.md "Templates: data is never code").
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/**
 * A subject as it goes into the message's header: one line (every control character a space,
 * runs of spaces one), bounded. Every subject an email gets passes here, the event's (renderEmail)
 * and a workflow notify step's (deliverer.service.ts `queueEmail`): a file, room or user name
 * holding CR/LF never adds a header.
 */
export function subjectLine(value: string): string {
  const line = value.replace(CONTROL, ' ').replace(/ {2,}/g, ' ').trim();
  return line.length > SUBJECT_MAX_CHARS ? `${line.slice(0, SUBJECT_MAX_CHARS - 1)}…` : line;
}

/**
 * A field's value in the body, which is plain text only (no HTML part: a name is never markup):
 * control characters shown escaped (`\u000a`), so a value cannot start a line of its own that
 * reads as another field.
 */
function shown(value: unknown): string {
  const raw = typeof value === 'string' ? value : JSON.stringify(value);
  const text = raw.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return text.length > VALUE_MAX_CHARS ? `${text.slice(0, VALUE_MAX_CHARS - 1)}…` : text;
}

/**
 * The email of an event: a subject naming the event and what it is about (a transfer's name or
 * id, and a failure's error), and a plain-text body with the time and every field of the event's
 * data (api.md "Events": they carry no secrets). The same text every retry: rendered once, stored.
 */
export function renderEmail(event: string, at: Date, data: Record<string, unknown>): { subject: string; text: string } {
  const title = TITLES[event] ?? event;
  const subjectOf = [data.name, data.workflow_name, data.filename, data.id].find((v) => typeof v === 'string' && v !== '') as string | undefined;
  const error = typeof data.error === 'string' && data.error !== '' ? data.error : null;
  const subject = subjectLine(`[xfer] ${title}${subjectOf ? `: ${subjectOf}` : ''}${error ? ` — ${error}` : ''}`);
  const lines = [
    `${title}.`,
    '',
    `Event: ${event}`,
    `Time:  ${at.toISOString()}`,
    '',
    ...Object.entries(data).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}: ${shown(v)}`),
    '',
    '-- ',
    'Sent by xfer because this event is selected in the account\'s notification settings (xfer notifications settings get).',
  ];
  return { subject, text: `${lines.join('\n')}\n` };
}

/** Most events listed in full in one digest; the rest are counted. */
const DIGEST_MAX_LISTED = 200;

/**
 * The email of an hourly digest: a subject with the number of events and the hour (UTC), and a
 * body with each event's summary line and fields, oldest first.
 */
export function renderDigest(hourStart: Date, items: ReadonlyArray<{ event: string; at: Date; data: Record<string, unknown> }>): { subject: string; text: string } {
  const hour = hourStart.toISOString().slice(0, 13).replace('T', ' ');
  const subject = `[xfer] ${items.length} event${items.length === 1 ? '' : 's'} between ${hour}:00 and ${hour}:59 UTC`;
  const blocks = items.slice(0, DIGEST_MAX_LISTED).map(({ event, at, data }) => {
    const { subject: line, text } = renderEmail(event, at, data);
    const fields = text.split('\n\n')[2] ?? '';
    return `${at.toISOString()}  ${line.replace(/^\[xfer\] /, '')}\n${fields.split('\n').map((l) => `  ${l}`).join('\n')}`;
  });
  const more = items.length > DIGEST_MAX_LISTED ? [`… and ${items.length - DIGEST_MAX_LISTED} more (xfer activity lists them all).`] : [];
  const lines = [
    `${items.length} event${items.length === 1 ? '' : 's'} between ${hour}:00 and ${hour}:59 UTC.`, '',
    ...blocks.flatMap((b) => [b, '']), ...more,
    '-- ',
    'Sent by xfer once an hour because this account\'s notification settings have digest "hourly".',
  ];
  return { subject, text: `${lines.join('\n')}\n` };
}
