import { Flags } from '@oclif/core';
import type { FileRecord, SearchFilesQuery } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { fileColumns, sizeFlag } from '../../resources/files.js';
import { listFlags, printList } from '../../resources/lists.js';

export default class Search extends BaseCommand<typeof Search> {
  static override summary = 'Search files in every folder (GET /files/search).';
  static override description = `Every filter given must match; none lists every file. Newest first, one page by default, --all follows every page.
--query is a literal, case-insensitive part of the name; --type an exact MIME type or a family such as image/*; sizes are inclusive, in bytes or with a unit (1.5MB, 2GiB).`;
  static override examples = [
    '<%= config.bin %> files search -q report --type application/pdf',
    '<%= config.bin %> files search --type "image/*" --min-size 5MB --all --json | jq length',
  ];
  static override flags = {
    ...listFlags,
    query: Flags.string({ char: 'q', description: 'Part of the file name (case-insensitive)' }),
    type: Flags.string({ description: 'MIME type, e.g. application/pdf, or a family, e.g. image/*' }),
    'min-size': sizeFlag({ description: 'Smallest size (bytes, or e.g. 10MB)' }),
    'max-size': sizeFlag({ description: 'Largest size (bytes, or e.g. 1GiB)' }),
  };

  async run(): Promise<FileRecord[] | undefined> {
    const f = this.flags;
    const query: SearchFilesQuery = { q: f.query, type: f.type, min_size: f['min-size'], max_size: f['max-size'] };
    const files = this.client().files;
    return printList({ list: (q: SearchFilesQuery) => files.search(q), all: (q: SearchFilesQuery) => files.searchAll(q) }, f, query, fileColumns, this.listOutput);
  }
}
