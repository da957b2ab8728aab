import { GlobError, globToDirGlobs, globToRegexpSource } from './glob.js';
import { GoRegexp } from './regexp.js';

// rclone 1.75 fs/filter/glob_test.go, ported: the same globs give the same Go regular expressions
// (rclone's test also checks them through Go's regexp.Compile: here GoRegexp parses them). The
// ignore-case variants are left out (we have no ignore-case option); rclone's raw regular
// expressions `{{…}}` are refused here (glob.ts says why): those rows expect our refusal.

const REFUSED_REGEXP = 'raw regular expressions';

/** rclone's GlobStringToRegexp / GlobPathToRegexp: the regexp text, or the error. */
function translate(glob: string, pathMode: boolean, addAnchors: boolean): string {
  const source = globToRegexpSource(glob, pathMode, addAnchors);
  new GoRegexp(source);
  return source;
}

describe('globToRegexpSource, string mode (rclone TestGlobStringToRegexp)', () => {
  const table: [string, string, string][] = [
    [``, ``, ``],
    [`potato`, `potato`, ``],
    [`potato,sausage`, `potato,sausage`, ``],
    [`/potato`, `/potato`, ``],
    [`potato?sausage`, `potato.sausage`, ``],
    [`potat[oa]`, `potat[oa]`, ``],
    [`potat[a-z]or`, `potat[a-z]or`, ``],
    [`potat[[:alpha:]]or`, `potat[[:alpha:]]or`, ``],
    [`'.' '+' '(' ')' '|' '^' '$'`, `'\\.' '\\+' '\\(' '\\)' '\\|' '\\^' '\\$'`, ``],
    [`*.jpg`, `.*\\.jpg`, ``],
    [`a{b,c,d}e`, `a(b|c|d)e`, ``],
    [`a{b,{c,d}}e`, `a(b|(c|d))e`, ``],
    [`{a,{b,c},{d,{e,f}}}`, `(a|(b|c)|(d|(e|f)))`, ``],
    [`potato**`, ``, `too many stars`],
    [`potato**sausage`, ``, `too many stars`],
    [`*.p[lm]`, `.*\\.p[lm]`, ``],
    [`[\\[\\]]`, `[\\[\\]]`, ``],
    [`***potato`, ``, `too many stars`],
    [`***`, ``, `too many stars`],
    [`ab]c`, ``, `] without a matching [`],
    [`ab[c`, ``, `unclosed [`],
    [`ab{x{cd`, ``, `unclosed {`],
    [`ab{}}cd`, ``, `} without a matching {`],
    [`ab}c`, ``, `} without a matching {`],
    [`ab{c`, ``, `unclosed {`],
    [`*.{jpg,png,gif}`, `.*\\.(jpg|png|gif)`, ``],
    [`[a--b]`, ``, `invalid character class range`],
    [`a\\*b`, `a\\*b`, ``],
    [`a\\\\b`, `a\\\\b`, ``],
    [`a{{.*}}b`, ``, REFUSED_REGEXP],
    [`a{{.*}`, ``, REFUSED_REGEXP],
    [`{{regexp}}`, ``, REFUSED_REGEXP],
    [`\\{{{regexp}}`, ``, REFUSED_REGEXP],
    [`/{{regexp}}`, ``, REFUSED_REGEXP],
    [`/{{\\d{8}}}`, ``, REFUSED_REGEXP],
    [`/{{\\}}}`, ``, REFUSED_REGEXP],
    [`{{(?i)regexp}}`, ``, REFUSED_REGEXP],
  ];
  it.each(table)('%s', (glob, want, error) => {
    for (const addAnchors of [false, true]) {
      if (error === '') {
        expect(translate(glob, false, addAnchors)).toBe(addAnchors ? `^${want}$` : want);
      } else {
        expect(() => translate(glob, false, addAnchors)).toThrow(GlobError);
        expect(() => translate(glob, false, addAnchors)).toThrow(error);
      }
    }
  });
});

describe('globToRegexpSource, path mode (rclone TestGlobPathToRegexp)', () => {
  const table: [string, string, string][] = [
    [``, `(^|/)$`, ``],
    [`potato`, `(^|/)potato$`, ``],
    [`potato,sausage`, `(^|/)potato,sausage$`, ``],
    [`/potato`, `^potato$`, ``],
    [`potato?sausage`, `(^|/)potato[^/]sausage$`, ``],
    [`potat[oa]`, `(^|/)potat[oa]$`, ``],
    [`potat[a-z]or`, `(^|/)potat[a-z]or$`, ``],
    [`potat[[:alpha:]]or`, `(^|/)potat[[:alpha:]]or$`, ``],
    [`'.' '+' '(' ')' '|' '^' '$'`, `(^|/)'\\.' '\\+' '\\(' '\\)' '\\|' '\\^' '\\$'$`, ``],
    [`*.jpg`, `(^|/)[^/]*\\.jpg$`, ``],
    [`a{b,c,d}e`, `(^|/)a(b|c|d)e$`, ``],
    [`a{b,{c,d}}e`, `(^|/)a(b|(c|d))e$`, ``],
    [`{a,b/{c,d}/**}`, `(^|/)(a|b/(c|d)/.*)$`, ``],
    [`potato**`, `(^|/)potato.*$`, ``],
    [`potato**sausage`, `(^|/)potato.*sausage$`, ``],
    [`*.p[lm]`, `(^|/)[^/]*\\.p[lm]$`, ``],
    [`[\\[\\]]`, `(^|/)[\\[\\]]$`, ``],
    [`***potato`, ``, `too many stars`],
    [`***`, ``, `too many stars`],
    [`ab]c`, ``, `] without a matching [`],
    [`ab[c`, ``, `unclosed [`],
    [`ab{x{cd`, ``, `unclosed {`],
    [`ab{}}cd`, ``, `} without a matching {`],
    [`ab}c`, ``, `} without a matching {`],
    [`ab{c`, ``, `unclosed {`],
    [`*.{jpg,png,gif}`, `(^|/)[^/]*\\.(jpg|png|gif)$`, ``],
    [`[a--b]`, ``, `invalid character class range`],
    [`a\\*b`, `(^|/)a\\*b$`, ``],
    [`a\\\\b`, `(^|/)a\\\\b$`, ``],
    [`a{{.*}}b`, ``, REFUSED_REGEXP],
    [`a{{.*}`, ``, REFUSED_REGEXP],
    [`{{regexp}}`, ``, REFUSED_REGEXP],
    [`\\{{{regexp}}`, ``, REFUSED_REGEXP],
    [`/{{regexp}}`, ``, REFUSED_REGEXP],
    [`/{{\\d{8}}}`, ``, REFUSED_REGEXP],
    [`/{{\\}}}`, ``, REFUSED_REGEXP],
    [`{{(?i)regexp}}`, ``, REFUSED_REGEXP],
  ];
  it.each(table)('%s', (glob, want, error) => {
    if (error === '') {
      expect(translate(glob, true, true)).toBe(want);
    } else {
      expect(() => translate(glob, true, true)).toThrow(GlobError);
      expect(() => translate(glob, true, true)).toThrow(error);
    }
  });
});

describe('globToDirGlobs (rclone TestGlobToDirGlobs)', () => {
  const table: [string, string[]][] = [
    [`*`, ['/**']],
    [`/*`, ['/']],
    [`*.jpg`, ['/**']],
    [`/*.jpg`, ['/']],
    [`//*.jpg`, ['/']],
    [`///*.jpg`, ['/']],
    [`/a/*.jpg`, ['/a/', '/']],
    [`/a//*.jpg`, ['/a/', '/']],
    [`/a///*.jpg`, ['/a/', '/']],
    [`/a/b/*.jpg`, ['/a/b/', '/a/', '/']],
    [`a/*.jpg`, ['a/']],
    [`a/b/*.jpg`, ['a/b/', 'a/']],
    [`*/*/*.jpg`, ['*/*/', '*/']],
    [`a/b/`, ['a/b/', 'a/']],
    [`a/b`, ['a/']],
    [`a/b/*.{jpg,png,gif}`, ['a/b/', 'a/']],
    [`/a/{jpg,png,gif}/*.{jpg,png,gif}`, ['/a/{jpg,png,gif}/', '/a/', '/']],
    [`a/{b,{c,d}}/*.jpg`, ['/**']],
    [`a/{a,a*b,a**c}/d/`, ['/**']],
    [`/a/{a,a*b,a/c,d}/d/`, ['/**']],
    [`/a/{{.*}}/d/`, ['/**']],
    [`**`, ['**/']],
    [`a**`, ['a**/']],
    [`a**b`, ['a**/']],
    [`a**b**c**d`, ['a**b**c**/', 'a**b**/', 'a**/']],
    [`a**b/c**d`, ['a**b/c**/', 'a**b/', 'a**/']],
    [`/A/a**b/B/c**d/C/`, ['/A/a**b/B/c**d/C/', '/A/a**b/B/c**d/', '/A/a**b/B/c**/', '/A/a**b/B/', '/A/a**b/', '/A/a**/', '/A/', '/']],
    [`/var/spool/**/ncw`, ['/var/spool/**/', '/var/spool/', '/var/', '/']],
    [`var/spool/**/ncw/`, ['var/spool/**/ncw/', 'var/spool/**/', 'var/spool/', 'var/']],
    ['/file1.jpg', ['/']],
    ['/file2.png', ['/']],
    ['/*.jpg', ['/']],
    ['/*.png', ['/']],
    ['/potato', ['/']],
    ['/sausage1', ['/']],
    ['/sausage2*', ['/']],
    ['/sausage3**', ['/sausage3**/', '/']],
    ['/a/*.jpg', ['/a/', '/']],
  ];
  it.each(table)('%s', (glob, want) => {
    if (!glob.includes('{{')) expect(() => translate(glob, true, true)).not.toThrow();
    expect(globToDirGlobs(glob)).toEqual(want);
  });
});
