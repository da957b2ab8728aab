import { Flags } from '@oclif/core';
import {
  NOTIFICATION_DIGESTS, NOTIFICATION_STATUSES, WEBHOOK_EVENT_TYPES,
  type NotificationLogEntry, type NotificationSettings, type UpdateNotificationSettingsRequest,
} from '@xfer/shared';
import { usageError } from '../base-command.js';
import { readStdin } from '../input.js';
import { Messages } from '../messages.js';
import type { Column } from '../output.js';

export const logColumns: Column<NotificationLogEntry>[] = [
  { header: 'id', get: (n) => n.id },
  { header: 'event', get: (n) => n.event },
  { header: 'status', get: (n) => n.status },
  { header: 'attempts', get: (n) => n.attempts },
  { header: 'recipients', get: (n) => n.recipients.join(',') },
  { header: 'sent_at', get: (n) => n.sent_at },
  { header: 'error', get: (n) => n.error },
];

export const logStatusFlag = Flags.string({ description: 'Only notifications in this state', options: [...NOTIFICATION_STATUSES] });

/** The settings as one flat record for the human output (--json keeps the API's shape). */
export function flatSettings(s: NotificationSettings): Record<string, unknown> {
  return {
    email_enabled: s.email.enabled,
    recipients: s.email.recipients.join(','),
    from: s.email.from,
    smtp_host: s.email.smtp?.host ?? null,
    smtp_port: s.email.smtp?.port ?? null,
    smtp_tls: s.email.smtp ? (s.email.smtp.secure ? 'implicit' : 'starttls') : null,
    smtp_username: s.email.smtp?.username ?? null,
    smtp_password: s.email.smtp ? (s.email.smtp.has_password ? 'set' : 'none') : null,
    events: s.events.join(','),
    digest: s.digest,
    updated_at: s.updated_at,
  };
}

export const settingsFlags = {
  enable: Flags.boolean({ description: 'Send emails (--no-enable stops them; pending ones are cancelled)', allowNo: true }),
  recipient: Flags.string({ description: 'Address that receives the emails (repeat for several; replaces the list)', multiple: true }),
  from: Flags.string({ description: 'Sender address (From and the SMTP envelope)' }),
  'smtp-host': Flags.string({ description: 'SMTP server host name (public addresses only)' }),
  'smtp-port': Flags.integer({ description: 'SMTP server port (1-65535; usually 587 with STARTTLS, 465 with implicit TLS)', min: 1, max: 65535 }),
  'smtp-tls': Flags.string({ description: 'starttls (required, never plaintext) or implicit (TLS from the first byte)', options: ['starttls', 'implicit'] }),
  'smtp-username': Flags.string({ description: 'SMTP login; the password is read with --smtp-password-stdin' }),
  'smtp-password-stdin': Flags.boolean({ description: 'Read the SMTP password from stdin (never from the command line)', exclusive: ['clear-smtp-password'] }),
  'clear-smtp-password': Flags.boolean({ description: 'Remove the stored SMTP password' }),
  event: Flags.string({ description: 'Event to email (repeat for several; replaces the list)', options: [...WEBHOOK_EVENT_TYPES], multiple: true }),
  digest: Flags.string({ description: 'none: one email per event; hourly: one email per hour listing its events', options: [...NOTIFICATION_DIGESTS] }),
};

type SettingsFlags = {
  enable?: boolean; recipient?: string[]; from?: string; 'smtp-host'?: string; 'smtp-port'?: number; 'smtp-tls'?: string;
  'smtp-username'?: string; 'smtp-password-stdin'?: boolean; 'clear-smtp-password'?: boolean; event?: string[]; digest?: string;
};

/**
 * The PUT body: the current settings with the flags given applied (PUT replaces the whole
 * settings; the stored password is kept unless a new one is piped or --clear-smtp-password).
 */
export async function mergedSettings(current: NotificationSettings, f: SettingsFlags): Promise<UpdateNotificationSettingsRequest> {
  const given = Object.entries(f).some(([, v]) => v !== undefined && v !== false);
  if (!given && f.enable === undefined) throw usageError(Messages.nothingToUpdate);
  const smtpGiven = f['smtp-host'] !== undefined || f['smtp-port'] !== undefined || f['smtp-tls'] !== undefined || f['smtp-username'] !== undefined
    || f['smtp-password-stdin'] || f['clear-smtp-password'];
  const was = current.email.smtp;
  let smtp: NonNullable<UpdateNotificationSettingsRequest['email']['smtp']> | null = null;
  if (was || smtpGiven) {
    const host = f['smtp-host'] ?? was?.host;
    if (!host) throw usageError(Messages.smtpHostMissing);
    const secure = f['smtp-tls'] !== undefined ? f['smtp-tls'] === 'implicit' : was?.secure ?? false;
    const username = f['smtp-username'] ?? was?.username ?? null;
    let password: string | null | undefined;
    if (f['smtp-password-stdin']) {
      password = (await readStdin()).replace(/\r?\n$/, '');
      if (!password) throw usageError(Messages.smtpPasswordMissing);
    } else if (f['clear-smtp-password']) password = null;
    smtp = { host, port: f['smtp-port'] ?? was?.port ?? (secure ? 465 : 587), secure, username, ...(password !== undefined && { password }) };
  }
  return {
    email: {
      enabled: f.enable ?? current.email.enabled,
      recipients: f.recipient ?? current.email.recipients,
      smtp,
      from: f.from ?? current.email.from,
    },
    events: f.event ?? current.events,
    digest: (f.digest ?? current.digest) as UpdateNotificationSettingsRequest['digest'],
  };
}
