/**
 * Glob patterns on file names, matched in time linear in the name for each alternative, never by a
 * backtracking regular expression: the glob libraries (picomatch, minimatch, micromatch) compile
 * to JavaScript regexes, and a pattern such as `*a*a*a*a*a*b` (or `*(a*)*(a*)b`) against a name of
 * 60 `a`s runs for seconds to minutes, freezing the agent's event loop, while patterns come from
 * any user who may create a watcher. The syntax is picomatch's common subset (its results on that
 * subset are the oracle of name-pattern.test.ts, except `[!a]`, which picomatch does not read as a
 * negated set):
 *
 * - `*` any run of characters, `?` exactly one character;
 * - `[abc]`, `[a-z]`, `[!a-z]` / `[^a-z]` one character of (not of) a set; `]` first is literal;
 * - `{a,b,c}` alternatives (nestable; at most 256 after expansion);
 * - `\x` the character x itself;
 * - a leading `!` negates the whole pattern;
 * - a name starting with `.` is not matched by a leading `*` or `?` (only by a `.` or a set with it).
 *
 * Extended globs (`*(…)`, `+(…)`, `?(…)`, `@(…)`, `!(…)`) and POSIX classes (`[[:alpha:]]`) are
 * refused, so a pattern never means something other than what picomatch would make of it.
 */

/** One position of a compiled alternative. */
type Token = { star: true } | { star: false; test: (ch: string) => boolean; wild?: boolean };

const MAX_ALTERNATIVES = 256;

/** A pattern that cannot be compiled; the message completes "pattern …". */
export class NamePatternError extends Error {}

/** Compiles `pattern` to a predicate on file names; throws `NamePatternError`. */
export function compileNamePattern(pattern: string): (name: string) => boolean {
  const negated = pattern.startsWith('!') && pattern.length > 1;
  const body = negated ? pattern.slice(1) : pattern;
  if (/(^|[^\\])[*+?@!]\(/.test(pattern)) throw new NamePatternError('uses an extended glob such as +(…) or !(…), which is not supported (use {a,b} alternatives)');
  if (/\[:[a-z]+:\]/.test(body)) throw new NamePatternError('uses a POSIX character class such as [[:alpha:]], which is not supported (use ranges such as [a-zA-Z])');
  const alternatives = expandBraces(body).map(tokenize);
  const matches = (name: string): boolean => {
    const chars = Array.from(name);
    return alternatives.some((tokens) => (chars[0] !== '.' || !hidesDot(tokens[0])) && matchTokens(tokens, chars));
  };
  return negated ? (name) => !matches(name) : matches;
}

/** A leading `*` or `?` does not match the dot of a hidden file's name. */
function hidesDot(first: Token | undefined): boolean {
  return first === undefined || first.star || first.wild === true;
}

/**
 * `*` with backtracking to the last star only: O(name × pattern), since a later star can do
 * whatever an earlier one would have done by matching more.
 */
function matchTokens(tokens: Token[], chars: string[]): boolean {
  let p = 0;
  let s = 0;
  let starP = -1;
  let starS = 0;
  while (s < chars.length) {
    const t = tokens[p];
    if (t && !t.star && t.test(chars[s]!)) {
      p++;
      s++;
    } else if (t?.star) {
      starP = p++;
      starS = s;
    } else if (starP >= 0) {
      p = starP + 1;
      s = ++starS;
    } else {
      return false;
    }
  }
  while (tokens[p]?.star) p++;
  return p === tokens.length;
}

/** `{a,b}` alternatives, nested, outermost first; an unmatched `{` or a brace without a comma stays literal. */
function expandBraces(pattern: string): string[] {
  const chars = Array.from(pattern);
  let depth = 0;
  let open = -1;
  const commas: number[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i];
    if (c === '\\') {
      i++;
    } else if (c === '[') {
      i = classEnd(chars, i);
    } else if (c === '{') {
      if (depth++ === 0) open = i;
    } else if (c === '}' && depth > 0) {
      if (--depth === 0) {
        if (commas.length === 0) {
          open = -1;
          continue;
        }
        const head = chars.slice(0, open).join('');
        const tail = chars.slice(i + 1).join('');
        const cuts = [open, ...commas, i];
        const out: string[] = [];
        for (let k = 0; k + 1 < cuts.length; k++) {
          for (const inner of expandBraces(chars.slice(cuts[k]! + 1, cuts[k + 1]).join(''))) {
            for (const rest of expandBraces(tail)) {
              out.push(head + inner + rest);
              if (out.length > MAX_ALTERNATIVES) throw new NamePatternError(`expands to more than ${MAX_ALTERNATIVES} alternatives`);
            }
          }
        }
        return out;
      }
    } else if (c === ',' && depth === 1) {
      commas.push(i);
    }
  }
  return [pattern];
}

/** The index of the `]` closing the class opened at `start`, or `start` when it is not closed (a literal `[`). */
function classEnd(chars: string[], start: number): number {
  let i = start + 1;
  if (chars[i] === '!' || chars[i] === '^') i++;
  if (chars[i] === ']') i++;
  for (; i < chars.length; i++) {
    if (chars[i] === '\\') i++;
    else if (chars[i] === ']') return i;
  }
  return start;
}

function tokenize(alternative: string): Token[] {
  const chars = Array.from(alternative);
  const tokens: Token[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === '*') {
      if (!tokens.at(-1)?.star) tokens.push({ star: true });
    } else if (c === '?') {
      tokens.push({ star: false, test: () => true, wild: true });
    } else if (c === '[' && classEnd(chars, i) > i) {
      const end = classEnd(chars, i);
      tokens.push({ star: false, test: characterClass(chars.slice(i + 1, end)) });
      i = end;
    } else {
      const ch = c === '\\' && i + 1 < chars.length ? chars[++i]! : c;
      tokens.push({ star: false, test: (x) => x === ch });
    }
  }
  return tokens;
}

/** The members of `[…]` (without the brackets) as a predicate. */
function characterClass(inner: string[]): (ch: string) => boolean {
  let i = 0;
  const negated = inner[0] === '!' || inner[0] === '^';
  if (negated) i++;
  const ranges: [number, number][] = [];
  for (; i < inner.length; i++) {
    let lo = inner[i]!;
    if (lo === '\\' && i + 1 < inner.length) lo = inner[++i]!;
    let hi = lo;
    if (inner[i + 1] === '-' && i + 2 < inner.length) {
      hi = inner[i + 2] === '\\' && i + 3 < inner.length ? inner[i + 3]! : inner[i + 2]!;
      i += inner[i + 2] === '\\' ? 3 : 2;
    }
    ranges.push([lo.codePointAt(0)!, hi.codePointAt(0)!]);
  }
  return (ch) => {
    const code = ch.codePointAt(0)!;
    return ranges.some(([lo, hi]) => code >= lo && code <= hi) !== negated;
  };
}
