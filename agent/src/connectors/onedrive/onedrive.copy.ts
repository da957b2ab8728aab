import { setTimeout as sleep } from 'node:timers/promises';
import { NetworkRefusal } from '../network-guard.js';
import { ConnectorError } from '../types.js';
import type { OnedriveConfig } from './onedrive.config.js';
import { requestError, type GraphErrorContext } from './onedrive.errors.js';
import type { GraphClient } from './onedrive.graph.js';
import { endpointOf } from './onedrive.http.js';
import { sameAuthority } from '../authority.js';

/** The first wait between two polls of a copy's monitor URL, doubled after each poll up to MAX_POLL_MS. */
const FIRST_POLL_MS = 250;
const MAX_POLL_MS = 5_000;
/**
 * A copy the monitor has not reported done by then fails TRANSIENT. Graph may still finish it: its
 * item has the engine's temporary name, which the leftovers sweep removes (docs/agent.md "Leftovers").
 */
export const COPY_DEADLINE_MS = 60 * 60_000;
/** What of the service's own words a message keeps. */
const MAX_DETAIL_CHARS = 300;

/** Two connections of the same user on the same drive (OnedriveConfig.account), compared in constant time. */
export function sameAccount(a: OnedriveConfig, b: OnedriveConfig): boolean {
  return sameAuthority(a.account, b.account);
}

/** What a monitor URL answers (Microsoft Graph "Working with long running actions": asyncJobStatus). */
interface AsyncJobStatus {
  status?: unknown;
  resourceId?: unknown;
  percentageComplete?: unknown;
  statusDescription?: unknown;
  error?: { code?: unknown; message?: unknown };
}

/**
 * The monitor URL of a copy (the 202's Location), checked before it is followed. It comes from the
 * service's answer and is on another host in production (SharePoint's, api.onedrive.com), so it is
 * hostile input: absolute HTTPS only, no user info in it; its host is checked by the agent's network
 * guard when the connection is made (HttpsClient: allow/deny lists, metadata and link-local
 * addresses, DNS rebinding). It is polled without the access token: the documentation says the
 * monitor needs none, and the token never leaves Graph's origin (GraphClient).
 */
export function monitorUrl(location: string | string[] | undefined, graphOrigin: string, what: string): URL {
  const value = Array.isArray(location) ? location[0] : location;
  if (!value) throw new ConnectorError('TRANSIENT', `${what}: Microsoft Graph accepted the copy without a monitor URL (no Location)`);
  let url: URL;
  try {
    url = new URL(value, graphOrigin);
  } catch (err) {
    throw new ConnectorError('PERMISSION', `${what}: the monitor URL Microsoft Graph answered is not a URL; not following it`, { cause: err });
  }
  // The URL itself is not repeated in messages: it is the copy's capability (no token needed).
  if (url.protocol !== 'https:') throw new ConnectorError('PERMISSION', `${what}: the monitor URL Microsoft Graph answered is not HTTPS (${url.protocol}); not following it`);
  if (url.username || url.password) throw new ConnectorError('PERMISSION', `${what}: the monitor URL Microsoft Graph answered carries user info; not following it`);
  return url;
}

/**
 * Polls a copy's monitor URL until the copy is done: its `resourceId` (the new item's id; undefined
 * when the monitor answered a 303 to the result, as OneDrive's older documentation shows, which is not
 * followed). A failed or cancelled copy rejects TRANSIENT with the service's reason; a monitor host
 * the agent may not dial rejects PERMISSION (a configuration to change, not a fault to retry).
 * Waits 250 ms, then twice as long after each poll up to 5 s, until COPY_DEADLINE_MS; aborted by `signal`.
 */
export async function waitForCopy(graph: GraphClient, monitor: URL, ctx: Omit<GraphErrorContext, 'endpoint'>, signal?: AbortSignal, deadlineMs = COPY_DEADLINE_MS): Promise<string | undefined> {
  const what = `${ctx.op} ${JSON.stringify(ctx.path)}`;
  const endpoint = endpointOf(monitor.href);
  const until = Date.now() + deadlineMs;
  for (let wait = FIRST_POLL_MS; ; wait = Math.min(wait * 2, MAX_POLL_MS)) {
    const res = await graph.request({ method: 'GET', url: monitor.href, auth: false, signal, ctx, accept: [303] }).catch((err: unknown) => {
      const refused = NetworkRefusal.within(err);
      if (!refused) throw err;
      throw new ConnectorError('PERMISSION', `${what}: not following the monitor URL of Microsoft Graph's copy (${endpoint}): ${refused.message}`, { cause: err });
    });
    if (res.status === 303) {
      res.discard();
      return undefined;
    }
    const text = await res.text();
    let job: AsyncJobStatus;
    try {
      job = JSON.parse(text) as AsyncJobStatus;
    } catch (err) {
      throw new ConnectorError('TRANSIENT', `${what}: the copy's monitor at ${endpoint} answered no status (HTTP ${res.status}, not JSON)`, { cause: err });
    }
    if (job.status === 'completed') return typeof job.resourceId === 'string' && job.resourceId !== '' ? job.resourceId : undefined;
    if (job.status === 'failed' || job.status === 'cancelled' || job.status === 'cancelPending') {
      const detail = [job.error?.code, job.error?.message, job.statusDescription].filter((s) => typeof s === 'string' && s !== '').join(': ');
      throw new ConnectorError('TRANSIENT', `${what}: Microsoft Graph's copy ${job.status}${detail ? ` (${detail.slice(0, MAX_DETAIL_CHARS)})` : ''}`);
    }
    // notStarted, inProgress, waiting (interrupted, to be tried again), or a status this code does not know: not done yet.
    if (Date.now() + wait > until) {
      const done = typeof job.percentageComplete === 'number' ? `, ${Math.floor(job.percentageComplete)}% done` : '';
      throw new ConnectorError('TRANSIENT', `${what}: Microsoft Graph's copy did not complete within ${Math.round(deadlineMs / 60_000)} minutes${done}`);
    }
    try {
      await sleep(wait, undefined, { signal });
    } catch (err) {
      throw requestError(err, { ...ctx, endpoint }, signal);
    }
  }
}
