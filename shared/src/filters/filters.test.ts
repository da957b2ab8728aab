import { checkFilterOptions, compileFilters, type FileFilter } from './index.js';
import { RuleSet } from './rules.js';

// rclone 1.75 fs/filter/filter_test.go, ported (the parts that are rules, sizes and ages: not
// --files-from, hash or metadata filters, nor ignore-case, which we do not offer). rclone's
// ModTimeFrom / ModTimeTo become max_age / min_age counted back from `now`.

interface IncludeCase { path: string; size: number; modTime: number; want: boolean }

function expectIncludes(f: FileFilter, cases: IncludeCase[]): void {
  for (const c of cases) {
    expect([c.path, f.includeFile(c.path, c.size, new Date(c.modTime * 1000))]).toEqual([c.path, c.want]);
  }
}

function expectDirs(f: FileFilter, cases: [string, boolean][]): void {
  for (const [path, want] of cases) expect([path, f.includeDirectory(path)]).toEqual([path, want]);
}

const at = (unix: number): Date => new Date(unix * 1000);

describe('compileFilters (rclone filter_test.go)', () => {
  it('passes everything without rules or bounds (TestNewFilterDefault)', () => {
    const f = compileFilters(undefined, new Date());
    expect(f.empty).toBe(true);
    expect(compileFilters({ rules: [] }, new Date()).empty).toBe(true);
    expect(compileFilters({ rules: ['- x'] }, new Date()).empty).toBe(false);
  });

  it('min_size keeps files of at least that size (TestNewFilterMinSize)', () => {
    const f = compileFilters({ min_size: 100 }, new Date());
    expect(f.empty).toBe(false);
    expectIncludes(f, [
      { path: 'file1.jpg', size: 100, modTime: 0, want: true },
      { path: 'file2.jpg', size: 101, modTime: 0, want: true },
      { path: 'potato/file2.jpg', size: 99, modTime: 0, want: false },
    ]);
  });

  it('max_size keeps files of at most that size (TestNewFilterMaxSize)', () => {
    expectIncludes(compileFilters({ max_size: 100 }, new Date()), [
      { path: 'file1.jpg', size: 100, modTime: 0, want: true },
      { path: 'file2.jpg', size: 101, modTime: 0, want: false },
      { path: 'potato/file2.jpg', size: 99, modTime: 0, want: true },
    ]);
  });

  it('min_age and max_age together (TestNewFilterMinAndMaxAge)', () => {
    // ModTimeFrom 1440000002 (max_age), ModTimeTo 1440000003 (min_age), now 1440000010.
    const f = compileFilters({ max_age: 8, min_age: 7 }, at(1440000010));
    expectIncludes(f, [
      { path: 'file1.jpg', size: 100, modTime: 1440000000, want: false },
      { path: 'file2.jpg', size: 101, modTime: 1440000001, want: false },
      { path: 'file3.jpg', size: 102, modTime: 1440000002, want: true },
      { path: 'potato/file1.jpg', size: 98, modTime: 1440000003, want: true },
      { path: 'potato/file2.jpg', size: 99, modTime: 1440000004, want: false },
    ]);
  });

  it('min_age keeps files older than it (TestNewFilterMinAge)', () => {
    expectIncludes(compileFilters({ min_age: 8 }, at(1440000010)), [
      { path: 'file1.jpg', size: 100, modTime: 1440000000, want: true },
      { path: 'file2.jpg', size: 101, modTime: 1440000001, want: true },
      { path: 'file3.jpg', size: 102, modTime: 1440000002, want: true },
      { path: 'potato/file1.jpg', size: 98, modTime: 1440000003, want: false },
      { path: 'potato/file2.jpg', size: 99, modTime: 1440000004, want: false },
    ]);
  });

  it('max_age keeps files younger than it (TestNewFilterMaxAge)', () => {
    expectIncludes(compileFilters({ max_age: 8 }, at(1440000010)), [
      { path: 'file1.jpg', size: 100, modTime: 1440000000, want: false },
      { path: 'file2.jpg', size: 101, modTime: 1440000001, want: false },
      { path: 'file3.jpg', size: 102, modTime: 1440000002, want: true },
      { path: 'potato/file1.jpg', size: 98, modTime: 1440000003, want: true },
      { path: 'potato/file2.jpg', size: 99, modTime: 1440000004, want: true },
    ]);
  });

  it('lets a file of unknown modification time pass the age bounds', () => {
    const f = compileFilters({ max_age: 8, min_age: 7 }, at(1440000010));
    expect(f.includeFile('x', 0)).toBe(true);
    expect(f.includeFile('x', 0, at(1440000000))).toBe(false);
  });

  it('matches files and prunes directories as rclone does (TestNewFilterMatches)', () => {
    // rclone's test starts with "+ cleared" and "!": a reset we refuse (tested below).
    const f = compileFilters({
      rules: ['- /file1.jpg', '+ /file2.png', '+ /*.jpg', '- /*.png', '- /potato', '+ /sausage1', '+ /sausage2*',
        '+ /sausage3**', '+ /a/*.jpg', '- *'],
    }, new Date());
    expectIncludes(f, [
      { path: 'cleared', size: 100, modTime: 0, want: false },
      { path: 'file1.jpg', size: 100, modTime: 0, want: false },
      { path: 'file2.png', size: 100, modTime: 0, want: true },
      { path: 'FILE2.png', size: 100, modTime: 0, want: false },
      { path: 'afile2.png', size: 100, modTime: 0, want: false },
      { path: 'file3.jpg', size: 101, modTime: 0, want: true },
      { path: 'file4.png', size: 101, modTime: 0, want: false },
      { path: 'potato', size: 101, modTime: 0, want: false },
      { path: 'sausage1', size: 101, modTime: 0, want: true },
      { path: 'sausage1/potato', size: 101, modTime: 0, want: false },
      { path: 'sausage2potato', size: 101, modTime: 0, want: true },
      { path: 'sausage2/potato', size: 101, modTime: 0, want: false },
      { path: 'sausage3/potato', size: 101, modTime: 0, want: true },
      { path: 'a/one.jpg', size: 101, modTime: 0, want: true },
      { path: 'a/one.png', size: 101, modTime: 0, want: false },
      { path: 'unicorn', size: 99, modTime: 0, want: false },
    ]);
    expectDirs(f, [
      ['sausage1', false],
      ['sausage2', false],
      ['sausage2/sub', false],
      ['sausage2/sub/dir', false],
      ['sausage3', true],
      ['SAUSAGE3', false],
      ['sausage3/sub', true],
      ['sausage3/sub/dir', true],
      ['sausage4', false],
      ['a', true],
      ['', true],
    ]);
  });

  it('derives the directory rules rclone derives (TestFilterAddDirRuleOrFileRule)', () => {
    const table: [string, string[], string[]][] = [
      ['- potato', ['- (^|/)potato$'], []],
      ['+ potato', ['+ (^|/)potato$'], ['+ ^.*$']],
      ['- potato/', ['- (^|/)potato/.*$'], ['- (^|/)potato/.*$']],
      ['+ potato/', [], ['+ (^|/)potato/$']],
      ['- *', ['- (^|/)[^/]*$'], ['- ^.*$']],
      ['+ *', ['+ (^|/)[^/]*$'], ['+ ^.*$']],
      ['- .*{,/**}', ['- (^|/)\\.[^/]*(|/.*)$'], ['- (^|/)\\.[^/]*(|/.*)$']],
      ['+ a/b/c/d', ['+ (^|/)a/b/c/d$'], ['+ (^|/)a/b/c/$', '+ (^|/)a/b/$', '+ (^|/)a/$']],
    ];
    for (const [rule, files, dirs] of table) {
      const set = new RuleSet();
      set.addRule(rule);
      expect([rule, set.files.dump(), set.dirs.dump()]).toEqual([rule, files, dirs]);
    }
  });

  it('matches the examples of rclone\'s filtering documentation (TestFilterMatchesFromDocs)', () => {
    const table: [string, boolean, string][] = [
      ['file.jpg', true, 'file.jpg'],
      ['file.jpg', true, 'directory/file.jpg'],
      ['file.jpg', false, 'afile.jpg'],
      ['file.jpg', false, 'directory/afile.jpg'],
      ['/file.jpg', true, 'file.jpg'],
      ['/file.jpg', false, 'afile.jpg'],
      ['/file.jpg', false, 'directory/file.jpg'],
      ['*.jpg', true, 'file.jpg'],
      ['*.jpg', true, 'directory/file.jpg'],
      ['*.jpg', false, 'file.jpg/anotherfile.png'],
      ['dir/**', true, 'dir/file.jpg'],
      ['dir/**', true, 'dir/dir1/dir2/file.jpg'],
      ['dir/**', false, 'directory/file.jpg'],
      ['dir/**', false, 'adir/file.jpg'],
      ['l?ss', true, 'less'],
      ['l?ss', true, 'lass'],
      ['l?ss', false, 'floss'],
      ['h[ae]llo', true, 'hello'],
      ['h[ae]llo', true, 'hallo'],
      ['h[ae]llo', false, 'hullo'],
      ['{one,two}_potato', true, 'one_potato'],
      ['{one,two}_potato', true, 'two_potato'],
      ['{one,two}_potato', false, 'three_potato'],
      ['{one,two}_potato', false, '_potato'],
      ['\\*.jpg', true, '*.jpg'],
      ['\\\\.jpg', true, '\\.jpg'],
      ['\\[one\\].jpg', true, '[one].jpg'],
      ['potato', true, 'potato'],
      ['potato', false, 'POTATO'],
    ];
    for (const [glob, included, file] of table) {
      const f = compileFilters({ rules: [`+ ${glob}`, '- *'] }, new Date());
      expect([glob, file, f.includeFile(file, 0)]).toEqual([glob, file, included]);
    }
  });

  it('includes a file no rule matches (rclone\'s default)', () => {
    const f = compileFilters({ rules: ['- *.tmp'] }, new Date());
    expect(f.includeFile('a/b.txt', 1)).toBe(true);
    expect(f.includeFile('a/b.tmp', 1)).toBe(false);
    // An exclude rule other than `*` never prunes a directory.
    expect(f.includeDirectory('a.tmp')).toBe(true);
  });

  it('says whether a directory may be pruned (TestNewFilterUsesDirectoryFilters)', () => {
    const table: [string[], boolean][] = [
      [[], false],
      [['+ *'], false],
      [['+ *.jpg', '- *'], false],
      [['- *.jpg'], false],
      [['- *.jpg', '+ *'], false],
      [['+ dir/*.jpg', '- *'], true],
      [['+ dir/**'], true],
      [['- dir/**'], true],
      [['- /dir/**'], true],
    ];
    for (const [rules, want] of table) expect([rules, compileFilters({ rules }, new Date()).prunes]).toEqual([rules, want]);
    expect(compileFilters({ min_size: 1 }, new Date()).prunes).toBe(false);
  });

  it('prunes a directory whose files the file rules alone would include (callers walk with includeDirectory)', () => {
    const f = compileFilters({ rules: ['+ x/y', '- **'] }, new Date());
    expect(f.includeFile('a/x/y', 1)).toBe(true);
    expect(f.includeDirectory('a')).toBe(false);
    expect(f.includeDirectory('x')).toBe(true);
    expect(f.includeFile('x/y', 1)).toBe(true);
  });

  it('throws on a rule that does not parse', () => {
    expect(() => compileFilters({ rules: ['+ ok', '- [a'] }, new Date())).toThrow('rules[1] "- [a" is not a valid pattern: unclosed [');
  });
});

describe('checkFilterOptions', () => {
  it('accepts valid options', () => {
    expect(checkFilterOptions({ rules: ['+ *.jpg', '- /tmp/', '- **'], min_size: 1, max_size: 1, min_age: 5, max_age: 6 })).toBeNull();
    expect(checkFilterOptions({})).toBeNull();
  });

  it('names the field and the rule', () => {
    expect(checkFilterOptions({ rules: ['+ a', '+ b', '- [a'] })).toBe('options.filters.rules[2]: "- [a" is not a valid pattern: unclosed [');
    expect(checkFilterOptions({ rules: ['*.jpg'] }, 'schedule.options.filters'))
      .toBe('schedule.options.filters.rules[0]: "*.jpg" is not a valid pattern: a rule is "+ pattern" (include) or "- pattern" (exclude)');
  });

  it.each([
    ['!', '"!" (clear the rules) is not supported'],
    ['# comment', 'a rule is "+ pattern"'],
    ['+x', 'a rule is "+ pattern"'],
    ['- ***', 'too many stars'],
    ['- a]', '] without a matching ['],
    ['+ {a,b', 'unclosed {'],
    ['+ a}', '} without a matching {'],
    ['+ [z-a]', 'invalid character class range'],
    ['+ [[:nope:]]', 'invalid character class [:nope:]'],
    ['+ \\q', 'invalid escape sequence \\q'],
    ['+ \\pL', 'escape \\p is not supported'],
    ['+ {{.*}}', 'raw regular expressions {{…}} are not supported'],
    ['- a ', 'ends with whitespace'],
    ['+  ', 'ends with whitespace'],
  ])('refuses %s', (rule, reason) => {
    expect(checkFilterOptions({ rules: [rule] })).toContain(reason);
    expect(checkFilterOptions({ rules: [rule] })).toMatch(/^options\.filters\.rules\[0\]: /);
  });

  it('refuses bounds that keep nothing', () => {
    expect(checkFilterOptions({ min_size: 10, max_size: 9 })).toBe('options.filters.min_size (10) is larger than options.filters.max_size (9)');
    expect(checkFilterOptions({ min_age: 10, max_age: 9 })).toMatch(/^options\.filters\.min_age \(10\) must be smaller than options\.filters\.max_age \(9\)/);
    expect(checkFilterOptions({ min_age: 10, max_age: 10 }, 'f')).toMatch(/^f\.min_age \(10\) must be smaller than f\.max_age \(10\)/);
  });
});
