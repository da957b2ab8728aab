import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { acceptsTcp, findExecutable, startServerProcess } from '@xfer/control-plane/process';
import type { Env, ServiceDefinition } from './types.js';

const MODULES = '/usr/lib/apache2/modules';

/**
 * A second real WebDAV server: Apache httpd with mod_dav_fs (Debian `apache2`), its own config,
 * lock database, htpasswd file and log in the data dir, on a free 127.0.0.1 port. `/dav` is a
 * writable tree; `/ro` a collection the same user may only read (PUT and MKCOL are 403), for the
 * suite's read-only case. As root, the workers run as `www-data`, which owns the trees.
 */
export const apacheDav: ServiceDefinition = {
  name: 'apache-dav',
  summary: 'WebDAV (Apache httpd mod_dav_fs, Debian apache2)',
  provides: ['XFER_TEST_APACHE_DAV_HOST', 'XFER_TEST_APACHE_DAV_PORT', 'XFER_TEST_APACHE_DAV_USER', 'XFER_TEST_APACHE_DAV_PASSWORD', 'XFER_TEST_APACHE_DAV_PREFIX'],
  async install(ctx) {
    tools(ctx.env);
  },
  async start(ctx) {
    const { apache2, htpasswd } = tools(ctx.env);
    const d = ctx.dataDir;
    const user = 'xfer';
    const password = randomBytes(18).toString('base64url');
    for (const dir of ['dav', 'ro', 'lock', 'run']) await mkdir(join(d, dir));
    await writeFile(join(d, 'ro', 'file.txt'), 'read only\n');
    // bcrypt hash; the password goes through stdin, never the process list.
    const hashed = spawnSync(htpasswd, ['-ciB', join(d, 'htpasswd'), user], { input: `${password}\n`, encoding: 'utf8', env: ctx.env as NodeJS.ProcessEnv });
    if (hashed.status !== 0) throw new Error(`htpasswd failed: ${hashed.stderr}`);
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      const [uid, gid] = wwwData();
      // mkdtemp made the data dir 0700: the workers must traverse it.
      await chmod(d, 0o711);
      for (const dir of ['dav', 'lock', 'run']) await chown(join(d, dir), uid, gid);
      await chmod(join(d, 'htpasswd'), 0o644);
    }
    const conf = join(d, 'httpd.conf');
    await writeFile(conf, config(d, asRoot));
    const { pid, port } = await startServerProcess({
      name: 'apache2',
      bin: apache2,
      args: (port) => ['-f', conf, '-C', `Listen 127.0.0.1:${port}`, '-DFOREGROUND'],
      logPath: join(d, 'apache2.out.log'),
      env: ctx.env,
      timeoutMs: 15_000,
    });
    return {
      pid,
      env: {
        XFER_TEST_APACHE_DAV_HOST: '127.0.0.1',
        XFER_TEST_APACHE_DAV_PORT: String(port),
        XFER_TEST_APACHE_DAV_USER: user,
        XFER_TEST_APACHE_DAV_PASSWORD: password,
        XFER_TEST_APACHE_DAV_PREFIX: '/dav',
        XFER_TEST_APACHE_DAV_READONLY_PATH: '/ro',
      },
    };
  },
  isHealthy: (record) => acceptsTcp(Number(record.env.XFER_TEST_APACHE_DAV_PORT)),
};

function tools(env: Env): { apache2: string; htpasswd: string } {
  const path = { ...env, PATH: `${env.PATH ?? ''}:/usr/sbin:/usr/bin` };
  const apache2 = findExecutable('apache2', path);
  const htpasswd = findExecutable('htpasswd', path);
  if (!apache2 || !htpasswd) throw new Error('Apache httpd is not installed: apt-get install -y apache2 (it brings apache2-utils with htpasswd)');
  return { apache2, htpasswd };
}

function wwwData(): [number, number] {
  const id = (flag: string) => Number(spawnSync('id', [flag, 'www-data'], { encoding: 'utf8' }).stdout.trim());
  const uid = id('-u');
  const gid = id('-g');
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('the www-data user Apache runs as does not exist');
  return [uid, gid];
}

function config(d: string, asRoot: boolean): string {
  const modules = ['mpm_event', 'authz_core', 'authz_user', 'authn_core', 'authn_file', 'auth_basic', 'dav', 'dav_fs', 'alias', 'mime'];
  const auth = (require: string) => [
    '  Dav On', '  AuthType Basic', '  AuthName "xfer"', `  AuthUserFile ${d}/htpasswd`, require,
  ].join('\n');
  return [
    'ServerName 127.0.0.1',
    `PidFile ${d}/run/httpd.pid`,
    `DefaultRuntimeDir ${d}/run`,
    `ErrorLog ${d}/error.log`,
    'LogLevel warn',
    // Fewer closes of kept-alive connections, which a client may reuse at the moment they close.
    'MaxKeepAliveRequests 0',
    'KeepAliveTimeout 30',
    ...(asRoot ? ['User www-data', 'Group www-data'] : []),
    ...modules.map((m) => `LoadModule ${m}_module ${MODULES}/mod_${m}.so`),
    'TypesConfig /etc/mime.types',
    `DAVLockDB ${d}/lock/DAVLock`,
    `Alias /dav ${d}/dav`,
    `Alias /ro ${d}/ro`,
    `<Directory ${d}/dav>`, auth('  Require valid-user'), '</Directory>',
    `<Directory ${d}/ro>`,
    auth('  <RequireAll>\n    Require valid-user\n    Require method GET HEAD OPTIONS PROPFIND\n  </RequireAll>'),
    '</Directory>',
    '',
  ].join('\n');
}
