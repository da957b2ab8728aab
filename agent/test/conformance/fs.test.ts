import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsConnector } from '../../src/connectors/fs/fs.connector.js';
import { allowingRoots } from '../helpers/tree.js';
import { runConformance, type ConformanceTarget } from './conformance.suite.js';
import { RawFs } from './fs.raw.js';

runConformance('fs (host directory)', async (): Promise<ConformanceTarget> => {
  const base = await mkdtemp(join(tmpdir(), 'xfer-conformance-fs-'));
  const root = join(base, 'root');
  await mkdir(root);
  return {
    connector: () => new FsConnector({ root, fsync: false, access: allowingRoots(base) }),
    raw: new RawFs(root),
    failures: [
      { name: 'missing base directory', connector: () => new FsConnector({ root: join(base, 'missing'), access: allowingRoots(base) }), code: 'NOT_FOUND', message: /does not exist/ },
    ],
    // Tests run as root, which no file mode stops: no read-only case here.
    listPastOnePage: true,
    modTime: 'set',
    cleanup: () => rm(base, { recursive: true, force: true }),
  };
});
