import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configDir, JsonProfileFile } from './profile-store.js';

let root: string;
beforeEach(() => { root = mkdtempSync(join(tmpdir(), 'xfer-profile-store-')); });
afterEach(() => rmSync(root, { recursive: true, force: true }));

test('the file and its directory are created 0600 and 0700 whatever the umask, and a profile set to undefined is removed', () => {
  const old = process.umask(0o022);
  try {
    const file = new JsonProfileFile<{ secret: string }>(join(root, 'xfer'), 'credentials.json', 0o600);
    expect(file.read()).toEqual({});
    file.set('a', { secret: '1' });
    file.set('b', { secret: '2' });
    expect(statSync(file.path).mode & 0o777).toBe(0o600);
    expect(statSync(join(root, 'xfer')).mode & 0o777).toBe(0o700);
    file.set('a', undefined);
    expect(file.read()).toEqual({ b: { secret: '2' } });
  } finally {
    process.umask(old);
  }
});

test('configDir follows XDG_CONFIG_HOME, else ~/.config', () => {
  expect(configDir({ XDG_CONFIG_HOME: '/x' }, '/home/u')).toBe('/x/xfer');
  expect(configDir({}, '/home/u')).toBe('/home/u/.config/xfer');
});
