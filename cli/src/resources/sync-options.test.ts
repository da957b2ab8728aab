import { filterRules, parseRcloneDuration, parseRcloneSize, syncOptions } from './sync-options.js';
import { parseRemote } from '../commands/sync.js';

test('sizes read as rclone reads them: suffixes in powers of 1024, KiB without one', () => {
  expect(parseRcloneSize('100')).toBe(100 * 1024);
  expect(parseRcloneSize('100b')).toBe(100);
  expect(parseRcloneSize('512k')).toBe(512 * 1024);
  expect(parseRcloneSize('10M')).toBe(10 * 1024 ** 2);
  expect(parseRcloneSize('1.5G')).toBe(1.5 * 1024 ** 3);
  expect(parseRcloneSize('2GiB')).toBe(2 * 1024 ** 3);
  expect(parseRcloneSize('1T')).toBe(1024 ** 4);
  for (const bad of ['', 'M', '-1M', '10X', '1e9', '10 MB/s']) expect(parseRcloneSize(bad)).toBeUndefined();
});

test('durations read as rclone reads them: seconds without a unit, units s m h d w, combined', () => {
  expect(parseRcloneDuration('90')).toBe(90);
  expect(parseRcloneDuration('90s')).toBe(90);
  expect(parseRcloneDuration('15m')).toBe(900);
  expect(parseRcloneDuration('1h30m')).toBe(5400);
  expect(parseRcloneDuration('7d')).toBe(7 * 86_400);
  expect(parseRcloneDuration('2w')).toBe(14 * 86_400);
  for (const bad of ['', 'h', '1y', '-5m', '1h 30m']) expect(parseRcloneDuration(bad)).toBeUndefined();
});

test('--filter, --include and --exclude become rules in the order given; any --include closes with "- **"', () => {
  const argv = ['--exclude', '*.tmp', '--filter=+ keep/**', '--include', '*.jpg', '--exclude=cache/'];
  expect(filterRules(argv, { filter: ['+ keep/**'], include: ['*.jpg'], exclude: ['*.tmp', 'cache/'] }))
    .toEqual(['- *.tmp', '+ keep/**', '+ *.jpg', '- cache/', '- **']);
  expect(filterRules(['--exclude', '*.tmp'], { exclude: ['*.tmp'] })).toEqual(['- *.tmp']);
  expect(filterRules([], {})).toEqual([]);
  // After `--` nothing is a flag.
  expect(filterRules(['--exclude', 'a', '--', '--exclude', 'b'], { exclude: ['a'] })).toEqual(['- a']);
});

test('every flag becomes its option; what cannot be read is a usage error naming the flag', () => {
  const argv = ['--include', '*.csv'];
  expect(syncOptions({
    mode: 'sync', compare: 'checksum', include: ['*.csv'], 'min-size': '1k', 'max-size': '1G', 'min-age': '1h', 'max-age': '7d',
    'max-delete': '10%', bwlimit: '10M/s', 'max-duration': '2h', window: '22:00-06:00', 'window-tz': 'Europe/Paris', cutoff: 'soft',
  }, argv)).toEqual({
    mode: 'sync', compare: 'checksum', cutoff: 'soft',
    filters: { rules: ['+ *.csv', '- **'], min_size: 1024, max_size: 1024 ** 3, min_age: 3600, max_age: 7 * 86_400 },
    max_delete: '10%', bandwidth_limit: 10 * 1024 ** 2, max_duration: 7200, window: { start: '22:00', end: '06:00', tz: 'Europe/Paris' },
  });
  expect(syncOptions({}, [])).toEqual({});
  expect(syncOptions({ 'max-delete': '25' }, []).max_delete).toBe(25);
  expect(syncOptions({ window: '01:00-02:00' }, []).window!.tz).toBe(Intl.DateTimeFormat().resolvedOptions().timeZone);
  const usage = (f: Parameters<typeof syncOptions>[0], message: string) =>
    expect(() => syncOptions(f, [])).toThrow(expect.objectContaining({ message, oclif: expect.objectContaining({ exit: 2 }) }));
  usage({ 'min-size': 'big' }, '--min-size "big" is not a size (e.g. 512k, 10M, 1.5G)');
  usage({ bwlimit: 'fast' }, '--bwlimit "fast" is not a size (e.g. 512k, 10M, 1.5G)');
  usage({ 'max-age': 'forever' }, '--max-age "forever" is not a duration (e.g. 90s, 15m, 2h, 7d)');
  usage({ 'max-delete': 'many' }, '--max-delete "many" is not a count or a percentage (e.g. 100, 10%)');
  usage({ window: '22-06' }, '--window "22-06" is not a window "HH:MM-HH:MM" (e.g. 22:00-06:00)');
});

test('SRC and DST: the connection before the first colon, the path after it', () => {
  expect(parseRemote('nas:/exports/daily')).toEqual({ connection: 'nas', path: '/exports/daily' });
  expect(parseRemote('nas:exports')).toEqual({ connection: 'nas', path: '/exports' });
  expect(parseRemote('665f1c2e9b1d4a0012345678:/')).toEqual({ connection: '665f1c2e9b1d4a0012345678', path: '/' });
  expect(() => parseRemote('/exports')).toThrow('Expected CONNECTION:PATH (a connection\'s name or id, a colon, a path), got "/exports"');
  expect(() => parseRemote(':/x')).toThrow(/Expected CONNECTION:PATH/);
});
