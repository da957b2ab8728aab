/**
 * rclone's glob translation, ported line for line from rclone 1.75 fs/filter/glob.go
 * (globToRegexp, globToDirGlobs) so that a rule means exactly what it means to rclone: the glob
 * becomes the same Go regular expression text rclone builds, which ./regexp.ts then matches with
 * Go's semantics (docs/api.md "Filters"; docs/architecture.md says why this is a port and not a
 * glob library).
 *
 * One deliberate difference: rclone's raw regular expression sections `{{ … }}` are refused, so a
 * stored rule is always a glob, never a regular expression (data is never code).
 */

/** A glob that rclone would refuse (or that we refuse); the message completes "… is not a valid pattern: ". */
export class GlobError extends Error {}

/**
 * The Go regular expression rclone builds for `glob`. `pathMode`: `*` stops at `/`, `**` crosses
 * it and a leading `/` anchors at the root (filter rules); otherwise `*` is `.*` (rclone's
 * GlobStringToRegexp, kept for its test table). `addAnchors`: `^…$`, or `(^|/)…$` for an
 * unanchored path glob (it then matches the end of the path at a segment boundary).
 */
export function globToRegexpSource(glob: string, pathMode = true, addAnchors = true): string {
  let re = '';
  if (addAnchors) {
    if (pathMode) {
      if (glob.startsWith('/')) {
        glob = glob.slice(1);
        re += '^';
      } else {
        re += '(^|/)';
      }
    } else {
      re += '^';
    }
  }
  let consecutiveStars = 0;
  const insertStars = (): void => {
    if (consecutiveStars > 0) {
      if (pathMode) {
        if (consecutiveStars === 1) re += '[^/]*';
        else if (consecutiveStars === 2) re += '.*';
        else throw new GlobError('too many stars (at most **)');
      } else if (consecutiveStars === 1) {
        re += '.*';
      } else {
        throw new GlobError('too many stars (at most *)');
      }
    }
    consecutiveStars = 0;
  };
  let braceDepth = 0;
  let inBrackets = 0;
  let slashed = false;
  let last = '';
  let next = '';
  // Iterates by code point, as Go ranges over runes.
  for (const c of glob) {
    last = next;
    next = c;
    if (slashed) {
      re += c;
      slashed = false;
      continue;
    }
    if (c !== '*') insertStars();
    if (inBrackets > 0) {
      re += c;
      if (c === '[') inBrackets++;
      if (c === ']') inBrackets--;
      continue;
    }
    switch (c) {
      case '\\':
        re += c;
        slashed = true;
        break;
      case '*':
        consecutiveStars++;
        break;
      case '?':
        re += pathMode ? '[^/]' : '.';
        break;
      case '[':
        re += c;
        inBrackets++;
        break;
      case ']':
        throw new GlobError('] without a matching [');
      case '{':
        if (braceDepth > 0 && last === '{') {
          // rclone reads `{{` as the start of a raw Go regular expression.
          throw new GlobError('raw regular expressions {{…}} are not supported (use a glob)');
        }
        braceDepth++;
        re += '(';
        break;
      case '}':
        if (braceDepth <= 0) throw new GlobError('} without a matching {');
        re += ')';
        braceDepth--;
        break;
      case ',':
        re += braceDepth > 0 ? '|' : c;
        break;
      case '.': case '+': case '(': case ')': case '|': case '^': case '$':
        re += '\\' + c;
        break;
      default:
        re += c;
    }
  }
  insertStars();
  if (inBrackets > 0) throw new GlobError('unclosed [');
  if (braceDepth !== 0) throw new GlobError('unclosed {');
  if (addAnchors) re += '$';
  return re;
}

// Globs whose directories rclone cannot work out: `/` or `**` inside {}, {{ }}, nested {}.
const TOO_HARD = /(\{[^{}]*(\*\*|\/)[^{}]*\})|\{\{|\}\}|\{[^{}]*\{/;

/**
 * The directory globs of a file glob (rclone's globToDirGlobs): matched against a directory path
 * with a trailing `/`, they say whether the glob could match something below that directory.
 */
export function globToDirGlobs(glob: string): string[] {
  const out: string[] = [];
  if (TOO_HARD.test(glob)) return ['/**'];
  glob = glob.replace(/\/{2,}/g, '/');
  for (;;) {
    let i = glob.lastIndexOf('/');
    const j = glob.lastIndexOf('**');
    let what = '';
    if (j > i) {
      i = j;
      what = '**';
    }
    if (i < 0) {
      if (out.length === 0) out.push('/**');
      break;
    }
    glob = glob.slice(0, i);
    const newGlob = glob + what + '/';
    if (out.length === 0 || out[out.length - 1] !== newGlob) out.push(newGlob);
  }
  return out;
}
