import { Args, Flags } from '@oclif/core';
import { WEBHOOK_DELIVERY_STATUSES, WEBHOOK_EVENT_TYPES, type Webhook, type WebhookDelivery } from '@xfer/shared';
import { usageError } from '../base-command.js';
import { readStdin } from '../input.js';
import { Messages } from '../messages.js';
import type { Column } from '../output.js';

export const webhookColumns: Column<Webhook>[] = [
  { header: 'id', get: (w) => w.id },
  { header: 'url', get: (w) => w.url },
  { header: 'events', get: (w) => w.events.join(',') },
  { header: 'active', get: (w) => w.active },
  { header: 'created_at', get: (w) => w.created_at },
];

/** The last attempt tells why a delivery is still pending or failed: its status code, else its error. */
function lastOutcome(d: WebhookDelivery): unknown {
  const last = d.attempt_log.at(-1);
  return last ? last.status_code ?? last.error : null;
}

export const deliveryColumns: Column<WebhookDelivery>[] = [
  { header: 'id', get: (d) => d.id },
  { header: 'event', get: (d) => d.event },
  { header: 'status', get: (d) => d.status },
  { header: 'attempts', get: (d) => d.attempts },
  { header: 'last', get: lastOutcome },
  { header: 'next_attempt_at', get: (d) => d.next_attempt_at },
];

export const webhookIdArg = { id: Args.string({ description: 'Webhook id', required: true }) };

export const deliveryStatusFlag = Flags.string({ description: 'Only deliveries in this state', options: [...WEBHOOK_DELIVERY_STATUSES] });

// Not --url: that global flag is the API's own URL.
const urlFlag = { description: 'HTTPS URL that receives the events (public addresses only)' };
const eventFlag = { description: 'Event to send (repeat for several)', options: [...WEBHOOK_EVENT_TYPES], multiple: true } as const;
const secretStdin = Flags.boolean({ description: 'Read the signing secret from stdin (16-256 visible ASCII characters)' });

/** Flags named after the API's fields: create needs url and events, update takes any. */
export const webhookCreateFlags = {
  'webhook-url': Flags.string({ ...urlFlag, required: true }),
  event: Flags.string({ ...eventFlag, required: true }),
  'secret-stdin': secretStdin,
};
export const webhookUpdateFlags = {
  'webhook-url': Flags.string(urlFlag),
  event: Flags.string(eventFlag),
  'secret-stdin': secretStdin,
};

/** The signing secret piped on stdin, or undefined without --secret-stdin; empty input is a usage error, not "no secret". */
export async function readWebhookSecret(flags: { 'secret-stdin'?: boolean }): Promise<string | undefined> {
  if (!flags['secret-stdin']) return undefined;
  const secret = (await readStdin()).trim();
  if (!secret) throw usageError(Messages.webhookSecretMissing);
  return secret;
}
