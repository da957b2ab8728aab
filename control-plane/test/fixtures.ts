import { createCipheriv, randomBytes } from 'node:crypto';
import { Vault, type Sealed } from '../src/lib/vault.js';
import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth } from './helper.js';

/** Resources for transfer and agent tests, created through the API as a client would. */

let seq = 0;
export const uniqueName = (prefix: string) => `${prefix}-${++seq}-${new Types.ObjectId()}`;

/** A credential value that must never show up in a response, a log line or an audit record. */
export const SECRET = `s3cr3t-${new Types.ObjectId()}`;

const BODIES = {
  sftp: { host: 'sftp.example.test', credentials: { username: 'u', password: SECRET } },
  s3: { host: 's3.example.test', credentials: { access_key_id: 'AKIAEXAMPLE', secret_access_key: SECRET }, options: { force_path_style: true } },
  webdav: { host: 'dav.example.test', credentials: { username: 'u', password: SECRET } },
} as const;

async function created<T>(res: { statusCode: number; body: string; json(): unknown }, what: string): Promise<T> {
  if (res.statusCode !== 201) throw new Error(`create ${what}: ${res.statusCode} ${res.body}`);
  return (res.json() as { data: T }).data;
}

export async function makeConnection(app: App, apiKey: string, type: keyof typeof BODIES, extra: Record<string, unknown> = {}) {
  const res = await app.inject({
    method: 'POST', url: '/api/v1/connections', headers: auth(apiKey), payload: { name: uniqueName(type), type, ...BODIES[type], ...extra },
  });
  return created<{ id: string; name: string; type: string }>(res, 'connection');
}

export async function makeAgent(app: App, apiKey: string, extra: Record<string, unknown> = {}) {
  const res = await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(apiKey), payload: { name: uniqueName('agent'), ...extra } });
  return created<{ id: string; name: string; token: string }>(res, 'agent');
}

export async function makeTransfer(app: App, apiKey: string, sourceConnectionId: string, destinationConnectionId: string, extra: Record<string, unknown> = {}) {
  const res = await app.inject({
    method: 'POST', url: '/api/v1/transfers', headers: auth(apiKey),
    payload: { name: uniqueName('job'), sourceConnectionId, sourcePath: '/in', destinationConnectionId, destinationPath: '/out', ...extra },
  });
  return created<{ id: string; name: string; status: string; attempt: number }>(res, 'transfer');
}

/** `POST /transfers/:id/<action>` (execute, cancel, retry). */
export const transferAction = (app: App, apiKey: string, id: string, action: string, query = '') =>
  app.inject({ method: 'POST', url: `/api/v1/transfers/${id}/${action}${query}`, headers: auth(apiKey) });

export const getTransfer = async (app: App, apiKey: string, id: string) => {
  const res = await app.inject({ method: 'GET', url: `/api/v1/transfers/${id}`, headers: auth(apiKey) });
  if (res.statusCode !== 200) throw new Error(`get transfer: ${res.statusCode} ${res.body}`);
  return res.json().data as Record<string, unknown> & { status: string };
};

/** Cumulative counters of a progress report. */
export const counters = (files_total: number, files_transferred: number, bytes_transferred: number, extra: Partial<Record<'files_skipped' | 'files_failed', number>> = {}) => ({
  files_total, files_transferred, files_skipped: extra.files_skipped ?? 0, files_failed: extra.files_failed ?? 0, bytes_transferred,
});

export const sha = (n: number) => n.toString(16).padStart(64, '0');

/** A value sealed the way it was before sealed values were bound (format 1: no additional data, no `v`). */
export function sealFormat1(key: Buffer, value: unknown): Sealed {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const data = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
  return { kid: new Vault([key]).activeKid, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
}

/** `PUT /agents/:id`. */
export const updateAgent = (app: App, apiKey: string, id: string, payload: Record<string, unknown>) =>
  app.inject({ method: 'PUT', url: `/api/v1/agents/${id}`, headers: auth(apiKey), payload });

/** `GET /agents/:id`'s data. */
export const getAgent = async (app: App, apiKey: string, id: string) => {
  const res = await app.inject({ method: 'GET', url: `/api/v1/agents/${id}`, headers: auth(apiKey) });
  if (res.statusCode !== 200) throw new Error(`get agent: ${res.statusCode} ${res.body}`);
  return res.json().data as Record<string, unknown> & { slots: { total: number; running: number; free: number } };
};
