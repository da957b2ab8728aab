import { createHash, randomBytes } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import { BlobClient, BlobServiceClient, StorageSharedKeyCredential, type BlobGetPropertiesResponse, type ContainerClient } from '@azure/storage-blob';
import type { ConnectionSettings } from '@xfer/shared';
import { BlobConnector } from '../src/connectors/blob/blob.connector.js';
import { DEFAULT_BLOB_TUNING, blobTarget } from '../src/connectors/blob/blob.config.js';
import { COPY_FROM_URL_MAX_BYTES, sameAccount } from '../src/connectors/blob/blob.copy.js';
import { ConnectorError, type Connector, type Entry } from '../src/connectors/types.js';
import { bodyOf, closedPort, uniqueName } from './conformance/helpers.js';
import { blobConnectionString, blobTestServer, readListSasConnectionString } from './conformance/blob.raw.js';
import { copyAll, fsConnector, rmTemp, tempDir } from './helpers/tree.js';

/**
 * Server-side copies of the blob connector (docs/connectors.md "Server-side copies") on the test
 * Azurite, which keeps no request log here (started `--silent`): what the agent read comes from a
 * counting subclass of the source connector, what the service did from the destination blobs'
 * properties (`x-ms-copy-status` and `x-ms-copy-source` appear only on a blob a copy made, and go
 * away once anything rewrites it).
 */
const server = blobTestServer;

function settings(path: string, credentials: Record<string, string> = { connection_string: server.connectionString }): ConnectionSettings {
  return { id: '000000000000000000000003', name: 'blob server copy', type: 'blob', host: null, port: 443, path, options: {}, agent_id: null, credentials };
}



/** A blob connector that counts the bytes read through it: a subclass, so that it is still the same store's connector. */
class CountingBlob extends BlobConnector {
  bytesRead = 0;

  override async read(path: string, opts?: { start?: number; end?: number; signal?: AbortSignal }): Promise<Readable> {
    const stream = await super.read(path, opts);
    const count = new Transform({ transform: (chunk: Buffer, _enc, done) => { this.bytesRead += chunk.length; done(null, chunk); } });
    stream.on('error', (err) => count.destroy(err));
    return stream.pipe(count);
  }
}

const MiB = 1024 * 1024;
/** Written in 1 MiB blocks: three whole blocks and a short fourth, a size no multiple of any block size. */
const BIG = 3 * MiB + 12_345;
const MTIME = new Date('2024-05-06T07:08:09.000Z');
/** A blob committed from blocks without a Content-MD5: nothing for the service to check a copy against. */
const NO_MD5 = Buffer.from('committed by another tool, no Content-MD5\n');
const ODD_NAME = 'a name with a space, a # and a diaeresis\n';

const TOTAL = BIG + 13 + ODD_NAME.length + NO_MD5.length;

let fromName: string;
let toName: string;
let from: ContainerClient;
let to: ContainerClient;
const sums: Record<string, string> = {};
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

async function sha256Of(blob: BlobClient): Promise<string | null> {
  try {
    const body = (await blob.download()).readableStreamBody!;
    const hash = createHash('sha256');
    for await (const chunk of body) hash.update(chunk as Buffer);
    return hash.digest('hex');
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return null;
    throw err;
  }
}

async function propsOf(blob: BlobClient): Promise<BlobGetPropertiesResponse | null> {
  return blob.getProperties().catch((err: { statusCode?: number }) => {
    if (err.statusCode === 404) return null;
    throw err;
  });
}

beforeAll(async () => {
  const service = BlobServiceClient.fromConnectionString(server.connectionString);
  fromName = uniqueName('copy-from');
  toName = uniqueName('copy-to');
  from = service.getContainerClient(fromName);
  to = service.getContainerClient(toName);
  await from.create();
  await to.create();
  const writer = new BlobConnector(settings(`/${fromName}/src`), { blockBytes: MiB });
  try {
    await writer.write('small.txt', bodyOf('a small file\n'), { size: 13, modifiedAt: MTIME });
    await writer.write('empty.txt', bodyOf(''), { size: 0, modifiedAt: MTIME });
    const big = randomBytes(BIG);
    const written = await writer.write('dir/big.bin', bodyOf(big), { size: BIG, modifiedAt: MTIME });
    expect(written.storeVerified).toBe('md5-blocks');
    sums['dir/big.bin'] = sha256(big);
    // A name to encode, in the copy source URL and in the SAS's signed resource.
    await writer.write('dir/naïve name #1.txt', bodyOf(ODD_NAME), { size: ODD_NAME.length, modifiedAt: MTIME });
  } finally {
    await writer.close();
  }
  sums['small.txt'] = sha256(Buffer.from('a small file\n'));
  sums['dir/naïve name #1.txt'] = sha256(Buffer.from(ODD_NAME));
  sums['empty.txt'] = sha256(Buffer.alloc(0));
  const bare = from.getBlockBlobClient('src/nomd5.bin');
  const id = Buffer.from('block-0').toString('base64');
  await bare.stageBlock(id, NO_MD5, NO_MD5.length);
  await bare.commitBlockList([id]);
}, 60_000);

afterAll(async () => {
  await from?.deleteIfExists();
  await to?.deleteIfExists();
});

const run = (source: Connector, destination: Connector) => copyAll(source, destination);

/** Every blob below `prefix/` of the destination container, with what made it: `copy` (a server-side copy) or `write`. */
async function madeBy(prefix: string): Promise<Record<string, 'copy' | 'write'>> {
  const out: Record<string, 'copy' | 'write'> = {};
  for await (const item of to.listBlobsFlat({ prefix: `${prefix}/`, includeCopy: true })) {
    out[item.name.slice(prefix.length + 1)] = item.properties.copyStatus === 'success' ? 'copy' : 'write';
  }
  return out;
}

test('same account and key: the service copies every file with a Content-MD5, verified by it; not one of their bytes is read through the agent', async () => {
  const source = new CountingBlob(settings(`/${fromName}/src`));
  const destination = new BlobConnector(settings(`/${toName}/copy`));
  try {
    const outcome = await run(source, destination);
    expect(outcome.status).toBe('completed');
    expect(outcome.files.map((f) => [f.path, f.status, f.verified_by])).toEqual([
      ['dir/big.bin', 'copied', 'server-copy-md5'],
      ['dir/naïve name #1.txt', 'copied', 'server-copy-md5'],
      ['empty.txt', 'copied', 'server-copy-md5'],
      // No Content-MD5 to check a copy against: its bytes move (and are checked as any write's).
      ['nomd5.bin', 'copied', 'content-md5'],
      ['small.txt', 'copied', 'server-copy-md5'],
    ]);
    // What the agent read: the one file without a Content-MD5, nothing of the others.
    expect(source.bytesRead).toBe(NO_MD5.length);
    expect(outcome.counters.bytes_transferred).toBe(TOTAL);
    expect(await madeBy('copy')).toEqual({ 'dir/big.bin': 'copy', 'dir/naïve name #1.txt': 'copy', 'empty.txt': 'copy', 'nomd5.bin': 'write', 'small.txt': 'copy' });

    for (const path of Object.keys(sums)) {
      const copy = to.getBlobClient(`copy/${path}`);
      const [props, original] = await Promise.all([copy.getProperties(), from.getBlobClient(`src/${path}`).getProperties()]);
      expect(await sha256Of(copy)).toBe(sums[path]);
      expect(props.contentLength).toBe(original.contentLength);
      expect(Buffer.from(props.contentMD5!).toString('hex')).toBe(Buffer.from(original.contentMD5!).toString('hex'));
      // The kept time, in rclone's format, as a write stores it; the connector reads it back.
      expect(props.metadata).toEqual({ mtime: '2024-05-06T07:08:09.000000000Z' });
      expect(await destination.stat(path)).toMatchObject({ size: original.contentLength, modifiedAt: MTIME });
      // The source went with a SAS of its own: read only, that one blob. On its own it reads the
      // source (Azurite checks a SAS's signature) and can write nothing.
      const sourceUrl = new URL(props.copySource!);
      expect(decodeURIComponent(sourceUrl.pathname)).toBe(`/${server.account}/${fromName}/src/${path}`);
      expect(Object.fromEntries(sourceUrl.searchParams)).toMatchObject({ sp: 'r', sr: 'b', sig: expect.any(String) });
      const anonymous = new BlobClient(props.copySource!);
      expect(await sha256Of(anonymous)).toBe(sums[path]);
      await expect(anonymous.getBlockBlobClient().upload('x', 1)).rejects.toMatchObject({ statusCode: 403 });
      sourceUrl.searchParams.set('sig', Buffer.alloc(32).toString('base64'));
      await expect(new BlobClient(sourceUrl.toString()).getProperties()).rejects.toMatchObject({ statusCode: 403 });
    }
  } finally {
    await source.close();
    await destination.close();
  }
}, 60_000);

test('other credentials (a SAS connection to the same account): no server-side copy, the bytes move', async () => {
  const source = new CountingBlob(settings(`/${fromName}/src`, { connection_string: readListSasConnectionString() }));
  const destination = new BlobConnector(settings(`/${toName}/moved`));
  try {
    const outcome = await run(source, destination);
    expect(outcome.status).toBe('completed');
    expect(outcome.files.map((f) => f.verified_by)).not.toContain('server-copy-md5');
    expect(source.bytesRead).toBe(TOTAL);
    expect(await madeBy('moved')).toEqual({ 'dir/big.bin': 'write', 'dir/naïve name #1.txt': 'write', 'empty.txt': 'write', 'nomd5.bin': 'write', 'small.txt': 'write' });
    expect(await sha256Of(to.getBlobClient('moved/dir/big.bin'))).toBe(sums['dir/big.bin']);
  } finally {
    await source.close();
    await destination.close();
  }
}, 60_000);

test('another account, another key, a SAS on either side, another store: null before any request', async () => {
  // Every connector here points at a closed port: any request would fail, not return null.
  const port = await closedPort();
  const endpoint = `http://127.0.0.1:${port}/${server.account}`;
  const at = (cs: string) => new BlobConnector(settings(`/${fromName}/src`, { connection_string: cs }));
  const destination = at(blobConnectionString({ endpoint }));
  const entry = (await new BlobConnector(settings(`/${fromName}/src`)).stat('small.txt'))!;
  const otherKey = randomBytes(32).toString('base64');
  const sources: Record<string, Connector> = {
    'another account': at(blobConnectionString({ account: 'otheraccount', key: otherKey, endpoint: `http://127.0.0.1:${port}/otheraccount` })),
    'the same account with another key': at(blobConnectionString({ endpoint, key: otherKey })),
    'the same account and key at another endpoint': at(blobConnectionString({ endpoint: `http://localhost:${port}/${server.account}` })),
    'account name and key (an https endpoint)': new BlobConnector({ ...settings(`/${fromName}/src`, { account_name: server.account, account_key: server.key }), host: '127.0.0.1', port }),
    'a SAS connection': at(readListSasConnectionString(endpoint)),
  };
  const tmp = tempDir();
  try {
    for (const [what, source] of Object.entries(sources)) {
      expect([what, await destination.copyFrom(source, 'small.txt', 'x.txt', { entry })]).toEqual([what, null]);
    }
    expect(await destination.copyFrom(fsConnector(tmp), 'small.txt', 'x.txt', { entry })).toBeNull();
    // A SAS destination cannot have the source authorized either.
    const sasDestination = at(readListSasConnectionString(endpoint));
    expect(await sasDestination.copyFrom(at(blobConnectionString({ endpoint })), 'small.txt', 'x.txt', { entry })).toBeNull();

    // Same account and key: the copy goes ahead (and here meets the closed port)...
    const same = at(blobConnectionString({ endpoint }));
    await expect(destination.copyFrom(same, 'small.txt', 'x.txt', { entry })).rejects.toMatchObject({ code: 'TRANSIENT', message: expect.stringMatching(/connection refused/) });
    // ...unless the listed file gives the service nothing to check, or is too large for one copy.
    expect(await destination.copyFrom(same, 'small.txt', 'x.txt', { entry: { ...entry, checksum: undefined } })).toBeNull();
    expect(await destination.copyFrom(same, 'small.txt', 'x.txt', { entry: { ...entry, etag: undefined } })).toBeNull();
    expect(await destination.copyFrom(same, 'small.txt', 'x.txt', { entry: { ...entry, size: COPY_FROM_URL_MAX_BYTES + 1 } })).toBeNull();
    expect(await destination.copyFrom(same, 'dir', 'dir', { entry: { path: 'dir', kind: 'directory', size: 0 } })).toBeNull();
  } finally {
    rmTemp(tmp);
  }
}, 30_000);

test('the account is the same however the key is given: connection string or account name and key', () => {
  const other = randomBytes(32).toString('base64');
  const target = (credentials: Record<string, string>) => blobTarget(settings('/c', credentials), DEFAULT_BLOB_TUNING);
  const byString = target({ connection_string: `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${server.key};EndpointSuffix=core.windows.net` });
  const byKey = target({ account_name: 'acct', account_key: server.key });
  expect(sameAccount(byString, byKey)).toBe(true);
  expect(sameAccount(byKey, target({ account_name: 'acct', account_key: other }))).toBe(false);
  expect(sameAccount(byKey, target({ account_name: 'acct2', account_key: server.key }))).toBe(false);
  expect(sameAccount(byKey, target({ connection_string: 'BlobEndpoint=https://acct.blob.core.windows.net;SharedAccessSignature=sv=2024-01-01&sig=abc' }))).toBe(false);
});

describe('one copy', () => {
  const source = () => new BlobConnector(settings(`/${fromName}/src`));
  const destination = () => new BlobConnector(settings(`/${toName}/one`));

  test('keeps the time it is given in the copy\'s metadata, which replaces the source\'s, as a write does', async () => {
    const meta = from.getBlockBlobClient('src/meta.txt');
    const data = Buffer.from('with metadata of its own\n');
    const md5 = createHash('md5').update(data).digest();
    await meta.upload(data, data.length, { metadata: { mtime: '2020-01-01T00:00:00.000000000Z', note: 'the source only' }, blobHTTPHeaders: { blobContentMD5: md5 } });
    const src = source();
    const dst = destination();
    const entry = (await src.stat('meta.txt'))!;
    const kept = new Date('2023-03-04T05:06:07.891Z');
    expect(await dst.copyFrom(src, 'meta.txt', 'meta.txt', { entry, modifiedAt: async () => kept }))
      .toEqual({ size: data.length, checksum: { algorithm: 'md5', value: md5.toString('hex') }, storeVerified: 'server-copy-md5' });
    const props = (await propsOf(to.getBlobClient('one/meta.txt')))!;
    expect(props.copyStatus).toBe('success');
    expect(props.metadata).toEqual({ mtime: '2023-03-04T05:06:07.891000000Z' });
    expect((await dst.stat('meta.txt'))?.modifiedAt).toEqual(kept);
  });

  test('a source rewritten since it was listed fails the copy, and nothing is created', async () => {
    const src = source();
    const dst = destination();
    const writer = new BlobConnector(settings(`/${fromName}/src`));
    await writer.write('changing.txt', bodyOf('the listed version\n'), {});
    const listed = (await src.stat('changing.txt'))!;
    await writer.write('changing.txt', bodyOf('written after the listing\n'), {});
    const refused = await dst.copyFrom(src, 'changing.txt', 'stale.txt', { entry: listed }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConnectorError);
    expect(refused).toMatchObject({ code: 'CONFLICT', message: expect.stringMatching(/changed since it was listed/) });
    expect(await propsOf(to.getBlobClient('one/stale.txt'))).toBeNull();
  });

  test('a copy that does not show the listed size and Content-MD5 is removed (Azure would refuse the MD5 itself)', async () => {
    const src = source();
    const dst = destination();
    const entry: Entry = (await src.stat('small.txt'))!;
    // The listed version (its ETag), but an MD5 that is not its: Azure fails the copy on
    // x-ms-source-content-md5 (400); Azurite ignores that header, and the check after the copy
    // finds the property differs, removes the copy, and the engine retries the file.
    const wrongMd5 = { ...entry, checksum: { algorithm: 'md5' as const, value: 'f'.repeat(32) } };
    await expect(dst.copyFrom(src, 'small.txt', 'bad-md5.txt', { entry: wrongMd5 })).rejects.toMatchObject({ code: expect.stringMatching(/^(TRANSIENT|CONFLICT)$/) });
    expect(await propsOf(to.getBlobClient('one/bad-md5.txt'))).toBeNull();
    await expect(dst.copyFrom(src, 'small.txt', 'bad-size.txt', { entry: { ...entry, size: 14 } })).rejects.toMatchObject({
      code: 'TRANSIENT', message: expect.stringMatching(/the copy holds 13 bytes, not the source's 14 bytes .*; the copy was removed/),
    });
    expect(await propsOf(to.getBlobClient('one/bad-size.txt'))).toBeNull();
  });
});
