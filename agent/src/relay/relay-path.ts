import { relativePath } from '../connectors/paths.js';

/**
 * Whether `path` may name a relayed item: relative to the job's source path, normalized (no `.`,
 * `..` or empty segment, no control character or backslash), so it stays below the source path
 * on the source side and below the destination path on the destination side, whatever the other
 * agent sends.
 */
export function isRelayPath(path: string): boolean {
  try {
    return path !== '' && relativePath(path) === path;
  } catch {
    return false;
  }
}
