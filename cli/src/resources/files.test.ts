import { etagSha256, localName, parseSize } from './files.js';

test('sizes: bytes, decimal units like the sizes shown, binary units; anything else is undefined', () => {
  expect(parseSize('1500')).toBe(1500);
  expect(parseSize('1.5MB')).toBe(1_500_000);
  expect(parseSize('10 kb')).toBe(10_000);
  expect(parseSize('2MiB')).toBe(2 * 1024 * 1024);
  expect(parseSize('1GiB')).toBe(2 ** 30);
  expect(parseSize('0')).toBe(0);
  for (const bad of ['', 'lots', '-1', '1.5.2MB', '10 parsecs', 'MB']) expect(parseSize(bad)).toBeUndefined();
});

test('the ETag is the SHA-256 only in the form the server sends (docs/api.md "Download")', () => {
  const sha = 'ab'.repeat(32);
  expect(etagSha256(`"${sha}"`)).toBe(sha);
  expect(etagSha256(`W/"${sha.toUpperCase()}"`)).toBe(sha);
  for (const other of [undefined, '', sha, '"abc"', `"${sha}0"`]) expect(etagSha256(other)).toBeUndefined();
});

test('a stored name becomes one safe file name here, whatever the server sent', () => {
  expect(localName('report 2026.pdf')).toBe('report 2026.pdf');
  expect(localName('résumé.txt')).toBe('résumé.txt');
  expect(localName('../../etc/passwd')).toBe('passwd');
  expect(localName('..\\..\\boot.ini')).toBe('boot.ini');
  expect(localName('/abs/path/x.bin')).toBe('x.bin');
  expect(localName('evil\r\nname')).toBe('evilname');
  for (const empty of [undefined, '', '.', '..', '/', 'a/..']) expect(localName(empty)).toBe('download');
});
