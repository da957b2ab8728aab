import { GlobError, globToDirGlobs, globToRegexpSource } from './glob.js';
import { GoRegexp } from './regexp.js';

/**
 * rclone's rule lists (rclone 1.75 fs/filter/filter.go and rules.go, ported): the file rules as
 * written and the directory rules rclone derives from them, which prune the listing.
 */

/** A rule that cannot be used, with the reason (what follows "is not a valid pattern: "). */
export class RuleError extends Error {}

interface Rule { include: boolean; re: GoRegexp }

/** An ordered rule list (rclone's `rules`): first match wins, no match includes. */
export class Rules {
  readonly list: Rule[] = [];
  private readonly seen = new Set<string>();

  /** Adds a rule unless the same one is already there (rclone drops duplicates; the first would decide anyway). */
  add(include: boolean, source: string, compiled: Map<string, GoRegexp>): void {
    const key = `${include ? '+' : '-'} ${source}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    let re = compiled.get(source);
    if (!re) {
      re = new GoRegexp(source);
      compiled.set(source, re);
    }
    this.list.push({ include, re });
  }

  /** The rules as rclone's `--dump filters` prints them (`+ regexp`), for the tests. */
  dump(): string[] {
    return this.list.map((r) => `${r.include ? '+' : '-'} ${r.re.source}`);
  }

  include(path: string): boolean {
    for (const rule of this.list) if (rule.re.test(path)) return rule.include;
    return true;
  }
}

/** The file and directory rules of a rule list (rclone's Filter.Add, AddRule and addDirGlobs). */
export class RuleSet {
  readonly files = new Rules();
  readonly dirs = new Rules();
  // Each Go regular expression is parsed once, however many rules produce it.
  private readonly compiled = new Map<string, GoRegexp>();

  /** Adds one `+ glob` / `- glob` line; throws RuleError. */
  addRule(rule: string): void {
    // rclone drops trailing whitespace from a rule in some places (a --filter-from line, the last
    // --filter flag) and keeps it in others: refused, so a rule means one thing.
    if (/\s$/u.test(rule)) throw new RuleError('it ends with whitespace, which rclone drops: remove it');
    if (rule === '!') throw new RuleError('"!" (clear the rules) is not supported: list only the rules that apply');
    if (rule.startsWith('+ ')) this.add(true, rule.slice(2));
    else if (rule.startsWith('- ')) this.add(false, rule.slice(2));
    else throw new RuleError('a rule is "+ pattern" (include) or "- pattern" (exclude)');
  }

  private add(include: boolean, glob: string): void {
    let isDirRule = glob.endsWith('/');
    let isFileRule = !isDirRule;
    // rclone: excluding "dir/" is excluding "dir/**".
    if (isDirRule && !include) glob += '**';
    if (glob.includes('**')) {
      isDirRule = true;
      isFileRule = true;
    }
    const source = globToRegexpSource(glob);
    if (isFileRule) {
      this.files.add(include, source, this.compiled);
      // An include rule says which directories must be listed; an exclude rule rules none out,
      // except `*`, which matches everything.
      if (include || glob === '*') {
        for (const dirGlob of globToDirGlobs(glob)) {
          if (dirGlob !== '/') this.dirs.add(include, globToRegexpSource(dirGlob), this.compiled);
        }
      }
    }
    if (isDirRule) this.dirs.add(include, source, this.compiled);
  }
}

/** The rule set of `rules`, or the index and reason of the first rule that cannot be used. */
export function buildRules(rules: readonly string[]): RuleSet | { index: number; reason: string } {
  const set = new RuleSet();
  for (const [index, rule] of rules.entries()) {
    try {
      set.addRule(rule);
    } catch (err) {
      if (err instanceof RuleError || err instanceof GlobError) return { index, reason: err.message };
      throw err;
    }
  }
  return set;
}

