import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { startStack, stopProc, type Stack } from '../src/stack.js';

/**
 * A refresh token the Microsoft Graph FAKE rotates while an agent tests a onedrive connection is
 * stored by the control plane: the fake's token here is single-use (spent by the first sign-in),
 * so a second agent process — which shares no token cache with the first — can only sign in
 * with the rotated token the control plane now hands it.
 */
const env = process.env;
const host = env.XFER_TEST_ONEDRIVE_HOST!;
const port = Number(env.XFER_TEST_ONEDRIVE_PORT);
const caFile = env.XFER_TEST_ONEDRIVE_CA_FILE!;
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ env });
}, 120_000);
afterAll(async () => {
  await stack?.stop();
}, 60_000);

/** A refresh token from the fake's test controls, invalid once spent. */
function singleUseRefreshToken(): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, ca: readFileSync(caFile), method: 'POST', path: '/_fake/refresh-tokens', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString('utf8')));
      res.on('end', () => ((res.statusCode ?? 0) === 200 ? resolve((JSON.parse(text) as { refresh_token: string }).refresh_token) : reject(new Error(`fake: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(JSON.stringify({ single_use: true }));
  });
}

test('the rotated refresh token is persisted: a fresh agent signs in with it after the first one spent the old one', async () => {
  const folder = `rotation-${randomBytes(4).toString('hex')}`;
  mkdirSync(join(env.XFER_TEST_ONEDRIVE_ROOT!, folder));
  // The agents trust the fake's self-signed certificate through Node's own setting, as an
  // operator would add a private CA; the connector has no switch to skip verification.
  const trust = { NODE_EXTRA_CA_CERTS: caFile };
  const first = await stack.startAgent('rotation-first', trust);
  const refreshToken = await singleUseRefreshToken();
  const { id } = await stack.api.data('POST', '/connections', {
    name: `onedrive ${folder}`, type: 'onedrive', host, port, path: `/${folder}`, options: { login_host: `${host}:${port}` },
    credentials: { client_id: env.XFER_TEST_ONEDRIVE_CLIENT_ID, client_secret: env.XFER_TEST_ONEDRIVE_CLIENT_SECRET, tenant_id: env.XFER_TEST_ONEDRIVE_TENANT, refresh_token: refreshToken },
  });
  const tested = await stack.api.data('POST', `/connections/${id}/test`, undefined, 200);
  expect(tested).toMatchObject({ success: true, message: expect.stringMatching(/accepted the credentials/) });

  await stopProc(first.proc);
  await stack.waitForAgent(first.id, 'offline');
  const second = await stack.startAgent('rotation-second', trust);
  const again = await stack.api.data('POST', `/connections/${id}/test`, undefined, 200);
  expect(again).toMatchObject({ success: true });

  // The spent token really is dead: a connection still holding it fails to sign in.
  const { id: stale } = await stack.api.data('POST', '/connections', {
    name: `onedrive stale ${folder}`, type: 'onedrive', host, port, path: `/${folder}`, options: { login_host: `${host}:${port}` },
    credentials: { client_id: env.XFER_TEST_ONEDRIVE_CLIENT_ID, client_secret: env.XFER_TEST_ONEDRIVE_CLIENT_SECRET, tenant_id: env.XFER_TEST_ONEDRIVE_TENANT, refresh_token: refreshToken },
  });
  expect(await stack.api.data('POST', `/connections/${stale}/test`, undefined, 200)).toMatchObject({ success: false, message: expect.stringMatching(/refresh token is expired, revoked/) });

  const audit = await stack.api.call('GET', '/activity?limit=100');
  expect(JSON.stringify(audit.body)).not.toContain(refreshToken);
  await stopProc(second.proc);
}, 120_000);
