import type { AuditEvent, Page, PageIterator, PageQuery, ServicePrincipal, XferClient } from '@xfer/shared';
import { usageError } from '../base-command.js';
import { Messages } from '../messages.js';
import type { Column } from '../output.js';

/** Every /settings route is console-only; said once here so each command's help carries it. */
export const CONSOLE_ONLY = 'Needs a session login (xfer auth login --email …): an API key is refused with exit code 3.';

/** The login events in the shape `printList` pages through (the client names them loginEvents/allLoginEvents). */
export function loginEventsOf(client: XferClient): { list(q: PageQuery): Promise<Page<AuditEvent>>; all(q: PageQuery): PageIterator<AuditEvent> } {
  return { list: (q) => client.settings.loginEvents(q), all: (q) => client.settings.allLoginEvents(q) };
}

export const servicePrincipalColumns: Column<ServicePrincipal>[] = [
  { header: 'name', get: (p) => p.name },
  { header: 'client_id', get: (p) => p.client_id },
];

/** `NAME=CLIENT_ID`, split at the last `=`: a client id has no `=` in practice, a display name may. */
export function parseServicePrincipal(text: string): ServicePrincipal {
  const at = text.lastIndexOf('=');
  const name = text.slice(0, at).trim();
  const clientId = text.slice(at + 1).trim();
  if (at < 0 || !name || !clientId) throw usageError(Messages.badServicePrincipal(text));
  return { name, client_id: clientId };
}
