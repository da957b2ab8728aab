/**
 * Matches the Go regular expressions rclone's glob translation produces (./glob.ts) with Go's
 * semantics (RE2 syntax, `regexp.MatchString`: unanchored search, `.` not matching `\n`, negated
 * classes matching it, `$` only at the end of the text), in time linear in the path: a Thompson
 * automaton run as a lazily built DFA, never a backtracking JavaScript RegExp (a rule such as
 * `**a**a**a**a**b` against a long path would freeze the agent; shared/src/name-pattern.ts has the
 * same concern).
 *
 * Only the subset the translation can produce is read: literals, `\` escapes, `.`, `[…]` classes
 * (ranges, POSIX `[:alpha:]`, `\d \s \w`), groups, `|`, `*`, `^`, `$`. Go constructs beyond that
 * (`\p{…}`, `\x…`, `\b`, octal escapes) are refused as not supported; Go syntax errors are refused
 * with Go's reason, as rclone refuses them.
 */

import { GlobError } from './glob.js';

type Ranges = number[]; // [lo0, hi0, lo1, hi1, ...] inclusive code point ranges

interface CharState { kind: 'char'; ranges: Ranges; negate: boolean; out: number }
interface SplitState { kind: 'split'; out: number; out1: number }
interface AssertState { kind: 'bol' | 'eol'; out: number }
interface MatchState { kind: 'match' }
type State = CharState | SplitState | AssertState | MatchState;

const DOT: Ranges = [0, 9, 11, 0x10ffff]; // Go's `.` without the s flag: anything but \n
const PERL: Record<string, Ranges> = {
  d: [0x30, 0x39],
  s: [9, 10, 12, 13, 32, 32],
  w: [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a],
};
const POSIX: Record<string, Ranges> = {
  alnum: [0x30, 0x39, 0x41, 0x5a, 0x61, 0x7a],
  alpha: [0x41, 0x5a, 0x61, 0x7a],
  ascii: [0, 0x7f],
  blank: [9, 9, 32, 32],
  cntrl: [0, 0x1f, 0x7f, 0x7f],
  digit: [0x30, 0x39],
  graph: [0x21, 0x7e],
  lower: [0x61, 0x7a],
  print: [0x20, 0x7e],
  punct: [0x21, 0x2f, 0x3a, 0x40, 0x5b, 0x60, 0x7b, 0x7e],
  space: [9, 13, 32, 32],
  upper: [0x41, 0x5a],
  word: [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a],
  xdigit: [0x30, 0x39, 0x41, 0x46, 0x61, 0x66],
};
const SIMPLE_ESCAPES: Record<string, number> = { a: 7, f: 12, n: 10, r: 13, t: 9, v: 11 };

function complement(r: Ranges): Ranges {
  const sorted: [number, number][] = [];
  for (let i = 0; i < r.length; i += 2) sorted.push([r[i]!, r[i + 1]!]);
  sorted.sort((a, b) => a[0] - b[0]);
  const out: Ranges = [];
  let next = 0;
  for (const [lo, hi] of sorted) {
    if (lo > next) out.push(next, lo - 1);
    next = Math.max(next, hi + 1);
  }
  if (next <= 0x10ffff) out.push(next, 0x10ffff);
  return out;
}

function inRanges(r: Ranges, cp: number): boolean {
  for (let i = 0; i < r.length; i += 2) if (cp >= r[i]! && cp <= r[i + 1]!) return true;
  return false;
}

const isAlnum = (c: string): boolean => /^[0-9A-Za-z]$/.test(c);

/** A fragment of the automaton under construction: its start and the dangling exits to patch. */
interface Frag { start: number; outs: { state: number; field: 'out' | 'out1' }[] }

class Parser {
  private readonly cps: string[];
  private pos = 0;
  readonly states: State[] = [];

  constructor(source: string) {
    this.cps = Array.from(source);
  }

  compile(): number {
    const frag = this.parseAlternation();
    if (this.pos < this.cps.length) throw new GlobError('unexpected )');
    const match = this.add({ kind: 'match' });
    this.patch(frag, match);
    return frag.start;
  }

  private add(s: State): number {
    this.states.push(s);
    return this.states.length - 1;
  }

  private patch(frag: Frag, to: number): void {
    for (const o of frag.outs) (this.states[o.state] as SplitState)[o.field] = to;
  }

  private empty(): Frag {
    // An epsilon: a split whose two exits go to the same place.
    const s = this.add({ kind: 'split', out: -1, out1: -1 });
    return { start: s, outs: [{ state: s, field: 'out' }, { state: s, field: 'out1' }] };
  }

  private parseAlternation(): Frag {
    const alternatives = [this.parseConcatenation()];
    while (this.cps[this.pos] === '|') {
      this.pos++;
      alternatives.push(this.parseConcatenation());
    }
    let frag = alternatives[alternatives.length - 1]!;
    for (let i = alternatives.length - 2; i >= 0; i--) {
      const a = alternatives[i]!;
      const s = this.add({ kind: 'split', out: a.start, out1: frag.start });
      frag = { start: s, outs: [...a.outs, ...frag.outs] };
    }
    return frag;
  }

  private parseConcatenation(): Frag {
    let frag: Frag | null = null;
    while (this.pos < this.cps.length && this.cps[this.pos] !== '|' && this.cps[this.pos] !== ')') {
      let atom = this.parseAtom();
      const q = this.cps[this.pos];
      if (q === '*') {
        this.pos++;
        if (this.cps[this.pos] === '*' || this.cps[this.pos] === '+' || this.cps[this.pos] === '?') {
          throw new GlobError('invalid nested repetition operator');
        }
        const s = this.add({ kind: 'split', out: atom.start, out1: -1 });
        this.patch(atom, s);
        atom = { start: s, outs: [{ state: s, field: 'out1' }] };
      } else if (q === '+' || q === '?' || q === '{') {
        throw new GlobError(`regular expression operator ${q} is not supported`);
      }
      if (frag) {
        this.patch(frag, atom.start);
        frag = { start: frag.start, outs: atom.outs };
      } else {
        frag = atom;
      }
    }
    return frag ?? this.empty();
  }

  private charFrag(ranges: Ranges, negate: boolean): Frag {
    const s = this.add({ kind: 'char', ranges, negate, out: -1 });
    return { start: s, outs: [{ state: s, field: 'out' }] };
  }

  private parseAtom(): Frag {
    const c = this.cps[this.pos++]!;
    switch (c) {
      case '(': {
        if (this.cps[this.pos] === '?') throw new GlobError('regular expression flags (?…) are not supported');
        const inner = this.parseAlternation();
        if (this.cps[this.pos] !== ')') throw new GlobError('missing closing )');
        this.pos++;
        return inner;
      }
      case '*': case '+': case '?':
        throw new GlobError(`missing argument to repetition operator ${c}`);
      case '[':
        return this.parseClass();
      case '.':
        return this.charFrag(DOT, false);
      case '^': case '$': {
        const s = this.add({ kind: c === '^' ? 'bol' : 'eol', out: -1 });
        return { start: s, outs: [{ state: s, field: 'out' }] };
      }
      case '\\': {
        const e = this.cps[this.pos];
        if (e !== undefined && /^[dDsSwW]$/.test(e)) {
          this.pos++;
          return this.charFrag(PERL[e.toLowerCase()]!, e !== e.toLowerCase());
        }
        const cp = this.parseEscape();
        return this.charFrag([cp, cp], false);
      }
      default: {
        const cp = c.codePointAt(0)!;
        return this.charFrag([cp, cp], false);
      }
    }
  }

  /** After a `\` (Go's parseEscape): the code point it stands for. */
  private parseEscape(): number {
    const e = this.cps[this.pos++];
    if (e === undefined) throw new GlobError('trailing backslash at end of expression');
    const cp = e.codePointAt(0)!;
    if (cp < 0x80 && !isAlnum(e)) return cp;
    if (SIMPLE_ESCAPES[e] !== undefined) return SIMPLE_ESCAPES[e]!;
    if (/^[0-7xpPAzbBQ]$/.test(e)) throw new GlobError(`escape \\${e} is not supported`);
    throw new GlobError(`invalid escape sequence \\${e}`);
  }

  /** After a `[` (Go's parseClass, with Go's flags: `-` allowed anywhere, `]` first is literal). */
  private parseClass(): Frag {
    let negate = false;
    if (this.cps[this.pos] === '^') {
      negate = true;
      this.pos++;
    }
    const ranges: Ranges = [];
    let first = true;
    while (this.pos < this.cps.length && (this.cps[this.pos] !== ']' || first)) {
      first = false;
      const c = this.cps[this.pos]!;
      if (c === '[' && this.cps[this.pos + 1] === ':') {
        const rest = this.cps.slice(this.pos + 2);
        const end = rest.findIndex((x, i) => x === ':' && rest[i + 1] === ']');
        if (end >= 0) {
          let name = rest.slice(0, end).join('');
          const neg = name.startsWith('^');
          if (neg) name = name.slice(1);
          const r = POSIX[name];
          if (!r) throw new GlobError(`invalid character class [:${neg ? '^' : ''}${name}:]`);
          ranges.push(...(neg ? complement(r) : r));
          this.pos += 2 + end + 2;
          continue;
        }
      }
      if (c === '\\') {
        const e = this.cps[this.pos + 1];
        if (e === 'p' || e === 'P') throw new GlobError(`escape \\${e} is not supported`);
        if (e !== undefined && /^[dDsSwW]$/.test(e)) {
          const r = PERL[e.toLowerCase()]!;
          ranges.push(...(e === e.toLowerCase() ? r : complement(r)));
          this.pos += 2;
          continue;
        }
      }
      const lo = this.parseClassChar();
      if (this.cps[this.pos] === '-' && this.pos + 1 < this.cps.length && this.cps[this.pos + 1] !== ']') {
        this.pos++;
        const hi = this.parseClassChar();
        if (hi < lo) throw new GlobError('invalid character class range');
        ranges.push(lo, hi);
      } else {
        ranges.push(lo, lo);
      }
    }
    if (this.pos >= this.cps.length) throw new GlobError('missing closing ]');
    this.pos++;
    return this.charFrag(ranges, negate);
  }

  private parseClassChar(): number {
    if (this.pos >= this.cps.length) throw new GlobError('missing closing ]');
    const c = this.cps[this.pos++]!;
    if (c === '\\') return this.parseEscape();
    return c.codePointAt(0)!;
  }
}

/**
 * Most automaton states one rule's DFA cache holds (summed over its DFA states) before it starts
 * over: memory stays bounded (about 160 KB a rule) even for a rule built to blow the DFA up; a
 * usual rule needs a few dozen.
 */
const MAX_CACHED_IDS = 20_000;

/** A DFA state: the automaton states it stands for, whether a match ends here / at the end of the text. */
interface DState { ids: number[]; matched: boolean; accepting: boolean; next: Map<number, DState> }

/** A compiled Go regular expression of the supported subset; `test` is Go's MatchString. */
export class GoRegexp {
  private readonly states: State[];
  private readonly start: number;
  private cache = new Map<string, DState>();
  private cachedIds = 0;
  private initial: DState | undefined;
  private restart: number[] | undefined;
  /** No state of the restart set consumes or accepts: once the run is empty it stays empty. */
  private restartInert = false;

  /** Throws GlobError when Go would refuse `source` or it is outside the supported subset. */
  constructor(readonly source: string) {
    const p = new Parser(source);
    this.start = p.compile();
    this.states = p.states;
  }

  /** Adds the epsilon closure of `id` to `set` (`^` only holds at the start of the text; `$` is kept for the end). */
  private close(id: number, atStart: boolean, set: Set<number>): void {
    const stack = [id];
    while (stack.length > 0) {
      const i = stack.pop()!;
      if (set.has(i)) continue;
      set.add(i);
      const s = this.states[i]!;
      if (s.kind === 'split') stack.push(s.out1, s.out);
      else if (s.kind === 'bol' && atStart) stack.push(s.out);
    }
  }

  /** Whether a state of `ids` reaches a match at the end of the text. */
  private acceptsAtEnd(ids: number[]): boolean {
    const seen = new Set<number>();
    const stack = [...ids];
    while (stack.length > 0) {
      const i = stack.pop()!;
      if (seen.has(i)) continue;
      seen.add(i);
      const s = this.states[i]!;
      if (s.kind === 'match') return true;
      if (s.kind === 'split') stack.push(s.out, s.out1);
      else if (s.kind === 'eol') stack.push(s.out);
    }
    return false;
  }

  private dstate(set: Set<number>): DState {
    const ids = [...set].sort((a, b) => a - b);
    const key = ids.join(',');
    let d = this.cache.get(key);
    if (!d) {
      if (this.cachedIds + ids.length > MAX_CACHED_IDS) {
        this.cache = new Map();
        this.cachedIds = 0;
        this.initial = undefined;
      }
      this.cachedIds += ids.length;
      d = { ids, matched: ids.some((i) => this.states[i]!.kind === 'match'), accepting: this.acceptsAtEnd(ids), next: new Map() };
      this.cache.set(key, d);
    }
    return d;
  }

  test(text: string): boolean {
    if (!this.initial) {
      const set = new Set<number>();
      this.close(this.start, true, set);
      this.initial = this.dstate(set);
    }
    if (!this.restart) {
      const set = new Set<number>();
      this.close(this.start, false, set);
      this.restart = [...set];
      this.restartInert = this.restart.every((i) => this.states[i]!.kind === 'split' || this.states[i]!.kind === 'bol');
    }
    let d = this.initial;
    for (const ch of text) {
      // A match anywhere is a match (Go's MatchString is a search, not a whole-text match).
      if (d.matched) return true;
      const cp = ch.codePointAt(0)!;
      let n = d.next.get(cp);
      if (!n) {
        const set = new Set<number>();
        for (const i of d.ids) {
          const s = this.states[i]!;
          if (s.kind === 'char' && inRanges(s.ranges, cp) !== s.negate) this.close(s.out, false, set);
        }
        for (const i of this.restart) this.close(i, false, set);
        n = this.dstate(set);
        d.next.set(cp, n);
      }
      d = n;
      if (this.restartInert && d.ids.length === 0) return false;
    }
    return d.accepting;
  }
}
