import { GoRegexp } from './regexp.js';
import { globToRegexpSource } from './glob.js';

// Go's regexp semantics on the expressions rclone's glob translation builds (glob.ts).
const matches = (glob: string, path: string): boolean => new GoRegexp(globToRegexpSource(glob)).test(path);

describe('GoRegexp', () => {
  it('matches the end of the path at a segment boundary, or the whole path with a leading /', () => {
    expect(matches('b/c', 'a/b/c')).toBe(true);
    expect(matches('b/c', 'a/xb/c')).toBe(false);
    expect(matches('/b/c', 'a/b/c')).toBe(false);
    expect(matches('/a/b/c', 'a/b/c')).toBe(true);
    expect(matches('b', 'b/c')).toBe(false);
  });

  it('reads * within a segment, ** across them, ? as one character (a code point)', () => {
    expect(matches('a*c', 'abbc')).toBe(true);
    expect(matches('a*c', 'ab/c')).toBe(false);
    expect(matches('a**c', 'ab/c')).toBe(true);
    expect(matches('a?c', 'a😀c')).toBe(true);
    expect(matches('a?c', 'a/c')).toBe(false);
    expect(matches('日?', '日本')).toBe(true);
  });

  it('reads classes as Go does', () => {
    expect(matches('[a-c]x', 'bx')).toBe(true);
    expect(matches('[^a-c]x', 'dx')).toBe(true);
    expect(matches('[^a-c]x', 'ax')).toBe(false);
    expect(matches('[[:digit:]]', '7')).toBe(true);
    expect(matches('[[:^digit:]]', '7')).toBe(false);
    expect(matches('[\\d]z', '3z')).toBe(true);
    expect(matches('[\\[\\]]', ']')).toBe(true);
    expect(matches('[a-]', '-')).toBe(true);
    expect(matches('[é]', 'é')).toBe(true);
    // Negated classes match a newline; `**` (Go's `.`) does not.
    expect(matches('a[^x]b', 'a\nb')).toBe(true);
    expect(matches('a**b', 'a\nb')).toBe(false);
    expect(matches('a*b', 'a\nb')).toBe(true);
  });

  it('reads escapes as Go does (a trailing \\ escapes rclone\'s closing $)', () => {
    expect(matches('a\\*', 'a*')).toBe(true);
    expect(matches('a\\d', 'a5')).toBe(true);
    expect(matches('a\\ b', 'a b')).toBe(true);
    expect(matches('abc\\', 'abc$')).toBe(true);
    expect(matches('abc\\', 'abc')).toBe(false);
  });

  it('reads nested and empty alternatives', () => {
    expect(matches('a{b,{c,d}}e', 'ade')).toBe(true);
    expect(matches('a{b,}e', 'ae')).toBe(true);
    expect(matches('a{}e', 'ae')).toBe(true);
    expect(matches('x{a,b/**}', 'xb/c/d')).toBe(true);
  });

  it('stays linear on patterns that make a backtracking matcher explode', () => {
    const re = new GoRegexp(globToRegexpSource('**a**a**a**a**a**a**a**b'));
    const path = `${'a/'.repeat(2000)}a`;
    expect(re.test(path)).toBe(false);
    expect(re.test(`${path}b`)).toBe(true);
  });
});
