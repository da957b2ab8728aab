import type { ConnectionSettings } from '@xfer/shared';
import { createWebdavConnector, WebdavConnector } from '../../src/connectors/webdav/webdav.connector.js';
import { runConformance } from './conformance.suite.js';
import { bodyOf, closedPort, expectCode, uniqueName } from './helpers.js';
import { RawWebdav } from './webdav.raw.js';

interface DavServer {
  name: string;
  host: string;
  port: number;
  username: string;
  password: string;
  /** Where the writable WebDAV tree starts on the server. */
  prefix: string;
  /** A collection the user may read but not write (403 on PUT/MKCOL), when the server has one. */
  readonlyPath?: string;
}

// The servers of `npm run services` (e2e/src/services/webdav.service.ts), started by jest's global setup.
const env = process.env;
const rclone: DavServer = {
  name: 'rclone serve webdav',
  host: env.XFER_TEST_WEBDAV_HOST!,
  port: Number(env.XFER_TEST_WEBDAV_PORT),
  username: env.XFER_TEST_WEBDAV_USER!,
  password: env.XFER_TEST_WEBDAV_PASSWORD!,
  prefix: '',
};
const apache: DavServer = {
  name: 'Apache mod_dav',
  host: env.XFER_TEST_APACHE_DAV_HOST!,
  port: Number(env.XFER_TEST_APACHE_DAV_PORT),
  username: env.XFER_TEST_APACHE_DAV_USER!,
  password: env.XFER_TEST_APACHE_DAV_PASSWORD!,
  prefix: env.XFER_TEST_APACHE_DAV_PREFIX!,
  readonlyPath: env.XFER_TEST_APACHE_DAV_READONLY_PATH,
};

function settings(server: DavServer, base: string, over: Partial<ConnectionSettings> = {}, credentials: Record<string, string> = {}): ConnectionSettings {
  return {
    id: '000000000000000000000001', name: 'webdav conformance', type: 'webdav', host: server.host, port: server.port,
    path: base, options: { secure: false }, agent_id: null,
    credentials: { username: server.username, password: server.password, ...credentials }, ...over,
  };
}

function rawClient(server: DavServer, base: string): RawWebdav {
  return new RawWebdav({ url: `http://${server.host}:${server.port}`, username: server.username, password: server.password, base });
}

for (const server of [rclone, apache]) {
  runConformance(`webdav (${server.name}), base path with a space`, async () => {
    const base = `${server.prefix}/${uniqueName('conformance')}/with space`;
    const raw = rawClient(server, base);
    await raw.mkdirs();
    const port = await closedPort();
    const make = (over: Partial<ConnectionSettings> = {}, credentials: Record<string, string> = {}) => () => new WebdavConnector(settings(server, base, over, credentials));
    return {
      // Through the registry, as the agent builds it.
      connector: () => createWebdavConnector(settings(server, base)),
      raw,
      failures: [
        { name: 'wrong password', connector: make({}, { password: 'not-the-password' }), code: 'AUTH', message: /authentication failed/ },
        { name: 'unknown user', connector: make({}, { username: 'no-such-user' }), code: 'AUTH', message: /authentication failed/ },
        { name: 'wrong port', connector: make({ port }), code: 'TRANSIENT', message: /connection refused/ },
        { name: 'unknown host', connector: make({ host: 'no-such-host.invalid' }), code: 'TRANSIENT', message: /cannot resolve/ },
        { name: 'missing base path', connector: () => new WebdavConnector(settings(server, `${base}/missing`)), code: 'NOT_FOUND', message: /does not exist/ },
        { name: 'HTTPS to a plain-HTTP server', connector: make({ options: { secure: true } }), code: 'TRANSIENT', message: /TLS handshake failed.*secure to false/ },
      ],
      ...(server.readonlyPath ? { readOnly: () => new WebdavConnector(settings(server, server.readonlyPath!)) } : {}),
      unreachable: make({ port }),
      listPastOnePage: true,
      // rclone serve webdav sets the X-OC-Mtime of a PUT; Apache ignores it (getlastmodified is protected).
      modTime: server === rclone ? 'set' : 'none',
      cleanup: () => raw.destroy(),
    };
  });
}

describe('webdav connector', () => {
  const server = rclone;
  const base = `/${uniqueName('webdav')}`;
  const raw = rawClient(server, base);
  let c: WebdavConnector;
  beforeAll(async () => {
    await raw.mkdirs();
    c = new WebdavConnector(settings(server, base));
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
    const onFile = new WebdavConnector(settings(server, `${base}/plain.txt`));
    await expectCode(onFile.test(), 'CONFLICT', /not a directory/);
    await onFile.close();
  });

  it('refuses a user name with a colon (HTTP Basic cannot send it) before any request', () => {
    expect(() => new WebdavConnector(settings(server, base, {}, { username: 'a:b' }))).toThrow(/must not contain ':'/);
  });
});
