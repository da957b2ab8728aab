import fc from 'fast-check';
import picomatch from 'picomatch';
import { compileNamePattern, NamePatternError } from './name-pattern.js';

/**
 * picomatch (what users know from other tools) is the oracle on the syntax both share. Not `[!a]`:
 * picomatch reads it as "one of `!` and `a`" (or the text `[!a]`), where shells and this matcher
 * read it as "not `a`", like `[^a]`. Nor a name ending in `.` against a pattern holding `*.*`:
 * picomatch special-cases `*.*` as "has an extension" (`*.*` refuses `a.` where `a.*` takes it),
 * where shells and this matcher let the last `*` match nothing.
 */
const PATTERN_PARTS = ['a', 'b', '.', 'x', '-', '*', '?', '[ab]', '[a-c]', '[^b]', '{a,b}', '{a*,.x}', '{a,{b,x}}', '\\*', '\\?'];
const NAME_CHARS = ['a', 'b', 'c', '.', 'x', '-', '*', '?'];

test('agrees with picomatch on random patterns and names', () => {
  fc.assert(
    fc.property(
      fc.boolean(),
      fc.array(fc.constantFrom(...PATTERN_PARTS), { minLength: 1, maxLength: 7 }),
      // `.` and `..` are never a listed file's name (picomatch matches them with nothing).
      fc.array(fc.array(fc.constantFrom(...NAME_CHARS), { minLength: 1, maxLength: 8 }).map((c) => c.join('')).filter((n) => n !== '.' && n !== '..'), { minLength: 1, maxLength: 8 }),
      (negate, parts, names) => {
        const pattern = (negate ? '!' : '') + parts.join('');
        let ours: (name: string) => boolean;
        try {
          ours = compileNamePattern(pattern);
        } catch (err) {
          // Braces that expand past the bound are refused (name-pattern.ts); picomatch has no bound: nothing to compare.
          if (err instanceof NamePatternError && /alternatives/.test(err.message)) return;
          throw err;
        }
        const theirs = picomatch(pattern);
        for (const name of names) {
          if (pattern.includes('*.*') && name.endsWith('.')) continue;
          expect([pattern, name, ours(name)]).toEqual([pattern, name, theirs(name)]);
        }
      },
    ),
    { numRuns: 3000 },
  );
});

test.each([
  ['*.csv', ['a.csv', 'report 2026.csv'], ['.csv', 'a.CSV', 'a.csv.tmp', '.hidden.csv']],
  ['*.*', ['a.b', 'a.'], ['a', '.a']],
  ['[!a]*', ['b', 'xa', '!'], ['a', 'ab']],
  ['*.{csv,txt}', ['a.csv', 'b.txt'], ['c.tsv']],
  ['report-??.csv', ['report-01.csv'], ['report-1.csv', 'report-001.csv']],
  ['[!.]*', ['a'], ['.a']],
  ['.*', ['.hidden', '.a.csv'], ['visible']],
  ['!*.tmp', ['a.csv', '.x'], ['a.tmp']],
  ['données-*.csv', ['données-1.csv'], ['donnees-1.csv']],
  ['?.txt', ['é.txt', '😀.txt'], ['ab.txt']],
  ['\\*.txt', ['*.txt'], ['a.txt']],
])('%s', (pattern, yes, no) => {
  const m = compileNamePattern(pattern);
  for (const name of yes) expect([name, m(name)]).toEqual([name, true]);
  for (const name of no) expect([name, m(name)]).toEqual([name, false]);
});

test('patterns that make regex glob matchers backtrack for minutes match in linear time', () => {
  // A backtracking matcher would not return from these within the test's timeout.
  const name = `${'a'.repeat(250)}c`;
  for (const pattern of ['*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b', `${'*a'.repeat(100)}*b`, '*[ab]*[ab]*[ab]*[ab]*[ab]*[ab]*[ab]*c*d']) {
    expect(compileNamePattern(pattern)(name)).toBe(false);
  }
});

test.each([
  ['*(a*)*(a*)b', /extended glob/],
  ['+(a|b).csv', /extended glob/],
  ['!(x).csv', /extended glob/],
  ['[[:alpha:]]*', /POSIX character class/],
  ['{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}', /more than 256 alternatives/],
])('refuses %s', (pattern, message) => {
  expect(() => compileNamePattern(pattern)).toThrow(NamePatternError);
  expect(() => compileNamePattern(pattern)).toThrow(message);
});
