import type { Readable } from 'node:stream';
import { baseName, relativePath } from '../connectors/paths.js';
import type { Connector, Entry, RangeReader } from '../connectors/types.js';
import { CopyJobError } from './errors.js';
import type { SourceItem } from './types.js';

/**
 * The source half of the engine: the items under `sourcePath`, lazily, one listing page at a
 * time. A file path yields that one file (named by its base name); a directory yields its whole
 * tree, directories before their contents, paths relative to it. Nothing is opened until a
 * writer calls `open`, so items waiting in a queue hold no stream.
 */
export async function* readSide(source: Connector, sourcePath: string, signal: AbortSignal): AsyncGenerator<SourceItem> {
  const root = relativePath(sourcePath);
  const top = await source.stat(root, { signal });
  if (!top) throw new CopyJobError(`source path ${sourcePath} does not exist`);
  if (top.kind === 'file') {
    yield item(source, baseName(root), root, top);
    return;
  }
  const prefix = root === '' ? '' : `${root}/`;
  for await (const entry of source.list(root, { recursive: true, signal })) {
    if (!entry.path.startsWith(prefix) || entry.path.length === prefix.length) {
      throw new CopyJobError(`the source listed ${JSON.stringify(entry.path)}, which is not below ${sourcePath}`);
    }
    yield item(source, entry.path.slice(prefix.length), entry.path, entry);
  }
}

/**
 * How a file this agent reads itself at `path` of `source` is opened, in ranges too where several
 * at once pay (`capabilities.parallelReads`), and where it is (`SourceItem.at`).
 */
export function readAt(source: Connector, path: string): Pick<SourceItem, 'open' | 'rangeReader' | 'at'> {
  return {
    open: (signal: AbortSignal): Promise<Readable> => source.read(path, { signal }),
    ...(source.capabilities.parallelReads
      ? {
        rangeReader: async (signal: AbortSignal): Promise<RangeReader> => source.rangeReader?.(path, { signal }) ?? {
          // A store without a cheaper way reads each range on its own.
          read: (start, end, rangeSignal) => source.read(path, { start, end, signal: rangeSignal }),
          close: async () => {},
        },
      }
      : {}),
    at: { connector: source, path },
  };
}

function item(source: Connector, path: string, sourceRel: string, entry: Entry): SourceItem {
  return {
    path,
    entry,
    ...readAt(source, sourceRel),
    ...(entry.modifiedAtNeedsStat
      ? { keptModifiedAt: async (signal: AbortSignal) => (await source.stat(sourceRel, { signal }))?.modifiedAt }
      : {}),
  };
}
