import type { ConnectionSettings } from '@xfer/shared';
import { webdavConfig } from './webdav.config.js';
import { statusCode } from './webdav.errors.js';

function config(over: Partial<ConnectionSettings>) {
  return webdavConfig({
    id: '1', name: 'n', type: 'webdav', host: 'dav.example.com', port: 443, path: '/', options: {}, agent_id: null,
    credentials: { username: 'alice', password: 'pä:ss' }, ...over,
  });
}

describe('webdavConfig: endpoint, base path and Basic credentials', () => {
  it('is HTTPS unless options.secure is false, with the port always in the origin', () => {
    expect(config({}).origin).toBe('https://dav.example.com:443');
    expect(config({ port: 8080, options: { secure: false } }).origin).toBe('http://dav.example.com:8080');
    expect(config({ host: '::1', port: 8443 }).origin).toBe('https://[::1]:8443');
  });

  it('normalizes the base path (no trailing or doubled slashes) and keeps / as the root', () => {
    expect(config({ path: '/' }).basePath).toBe('/');
    expect(config({ path: '/remote.php//dav/files/alice/' }).basePath).toBe('/remote.php/dav/files/alice');
  });

  it('sends the password as UTF-8 Basic credentials (a colon in the password is fine)', () => {
    const { authorization } = config({});
    expect(Buffer.from(authorization.replace(/^Basic /, ''), 'base64').toString('utf8')).toBe('alice:pä:ss');
  });

  it('refuses a missing user name or one with a colon as AUTH, before any request', () => {
    expect(() => config({ credentials: { password: 'x' } })).toThrow(expect.objectContaining({ code: 'AUTH' }));
    expect(() => config({ credentials: { username: 'a:b', password: 'x' } })).toThrow(expect.objectContaining({ code: 'AUTH' }));
  });
});

describe('statusCode: HTTP answers to connector codes', () => {
  it.each([
    [401, 'AUTH'], [403, 'PERMISSION'], [404, 'NOT_FOUND'], [409, 'NOT_FOUND'], [410, 'NOT_FOUND'],
    [405, 'UNSUPPORTED'], [501, 'UNSUPPORTED'], [408, 'TRANSIENT'], [423, 'TRANSIENT'], [429, 'TRANSIENT'],
    [500, 'TRANSIENT'], [502, 'TRANSIENT'], [503, 'TRANSIENT'], [412, 'CONFLICT'], [413, 'CONFLICT'], [507, 'CONFLICT'],
  ])('%i is %s', (status, code) => {
    expect(statusCode(status)).toBe(code);
  });
});
