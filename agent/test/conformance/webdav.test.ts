import type { ConnectionSettings } from '@xfer/shared';
import { createConnector } from '../../src/connectors/index.js';
import { WebdavConnector } from '../../src/connectors/webdav/webdav.connector.js';
import { runConformance } from './conformance.suite.js';
import { bodyOf, closedPort, expectCode, uniqueName } from './helpers.js';
import { RawWebdav } from './webdav.raw.js';

// rclone serve webdav of `npm run services` (e2e/src/services/webdav.service.ts), started by jest's global setup.
const env = process.env;
const server = {
  host: env.XFER_TEST_WEBDAV_HOST!,
  port: Number(env.XFER_TEST_WEBDAV_PORT),
  username: env.XFER_TEST_WEBDAV_USER!,
  password: env.XFER_TEST_WEBDAV_PASSWORD!,
};
const url = `http://${server.host}:${server.port}`;

function settings(base: string, over: Partial<ConnectionSettings> = {}, credentials: Record<string, string> = {}): ConnectionSettings {
  return {
    id: '000000000000000000000001', name: 'webdav conformance', type: 'webdav', host: server.host, port: server.port,
    path: base, options: { secure: false }, agent_id: null,
    credentials: { username: server.username, password: server.password, ...credentials }, ...over,
  };
}

runConformance('webdav (rclone serve webdav), base path with a space', async () => {
  const base = `/${uniqueName('conformance')}/with space`;
  const raw = new RawWebdav({ url, username: server.username, password: server.password, base });
  await raw.mkdirs();
  const port = await closedPort();
  return {
    // Through the registry, as the agent builds it.
    connector: () => createConnector(settings(base)),
    raw,
    failures: [
      { name: 'wrong password', connector: () => new WebdavConnector(settings(base, {}, { password: 'not-the-password' })), code: 'AUTH', message: /authentication failed/ },
      { name: 'unknown user', connector: () => new WebdavConnector(settings(base, {}, { username: 'no-such-user' })), code: 'AUTH', message: /authentication failed/ },
      { name: 'wrong port', connector: () => new WebdavConnector(settings(base, { port })), code: 'TRANSIENT', message: /connection refused/ },
      { name: 'unknown host', connector: () => new WebdavConnector(settings(base, { host: 'no-such-host.invalid' })), code: 'TRANSIENT', message: /cannot resolve/ },
      { name: 'missing base path', connector: () => new WebdavConnector(settings(`${base}/missing`)), code: 'NOT_FOUND', message: /does not exist/ },
      {
        name: 'HTTPS to a plain-HTTP server', code: 'TRANSIENT', message: /TLS handshake failed.*secure to false/,
        connector: () => new WebdavConnector(settings(base, { options: { secure: true } })),
      },
    ],
    unreachable: () => new WebdavConnector(settings(base, { port })),
    listPastOnePage: true,
    cleanup: () => raw.destroy(),
  };
});

describe('webdav connector', () => {
  const base = `/${uniqueName('webdav')}`;
  const raw = new RawWebdav({ url, username: server.username, password: server.password, base });
  let c: WebdavConnector;
  beforeAll(async () => {
    await raw.mkdirs();
    c = new WebdavConnector(settings(base));
  });
  afterAll(async () => {
    await c.close();
    await raw.destroy();
  });

  it("reports the server's ETag on stat and list, and a new one after the content changes", async () => {
    await raw.put('etag.txt', Buffer.from('one'));
    const first = await c.stat('etag.txt');
    expect(first?.etag).toEqual(expect.any(String));
    expect(first?.checksum).toBeUndefined();
    await c.write('etag.txt', bodyOf('two, longer'), {});
    const second = await c.stat('etag.txt');
    expect(second?.etag).toEqual(expect.any(String));
    expect(second?.etag).not.toBe(first?.etag);
  });

  it('a base path that is a file is CONFLICT', async () => {
    await raw.put('plain.txt', Buffer.from('x'));
    const onFile = new WebdavConnector(settings(`${base}/plain.txt`));
    await expectCode(onFile.test(), 'CONFLICT', /not a directory/);
    await onFile.close();
  });

  it('refuses a user name with a colon (HTTP Basic cannot send it) before any request', () => {
    expect(() => new WebdavConnector(settings(base, {}, { username: 'a:b' }))).toThrow(/must not contain ':'/);
  });
});
