import { ConnectorError } from './types.js';

/**
 * Normalizes a connector path relative to the base path and refuses any that would leave it.
 * `'' | '/' | '.'` is the base itself (''); `a//b/./c/` is `a/b/c`; a `..` segment is resolved
 * and refused only when it climbs above the base. NUL, other control characters and backslashes
 * are refused (a backslash is a separator on some servers, so it could escape).
 */
export function relativePath(path: string): string {
  if (/[\u0000-\u001f\u007f]/.test(path)) throw new ConnectorError('PERMISSION', 'path must not contain control characters');
  if (path.includes('\\')) throw new ConnectorError('PERMISSION', `path must not contain backslashes: ${JSON.stringify(path)}`);
  const out: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (out.length === 0) throw new ConnectorError('PERMISSION', `path escapes the connection's base path: ${JSON.stringify(path)}`);
      out.pop();
    } else out.push(segment);
  }
  return out.join('/');
}

/** `base` (a normalized absolute base path such as `/` or `/data/in`) joined with a checked relative path. */
export function resolvePath(base: string, path: string): string {
  const rel = relativePath(path);
  const root = base === '/' ? '' : base.replace(/\/+$/, '');
  return rel === '' ? root || '/' : `${root}/${rel}`;
}

/** Parent of a relative path ('' for a top-level entry). */
export function parentOf(rel: string): string {
  const i = rel.lastIndexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

/** Last segment of a relative path. */
export function baseName(rel: string): string {
  return rel.slice(rel.lastIndexOf('/') + 1);
}

/** Joins relative segments, skipping empty ones. */
export function joinRel(...parts: string[]): string {
  return parts.filter((p) => p !== '').join('/');
}

/** A connector path as error messages show it: the base path is `/`. */
export function shownPath(rel: string): string {
  return rel === '' ? '/' : rel;
}
