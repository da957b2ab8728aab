import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { ShareServiceClient, StorageSharedKeyCredential } from '@azure/storage-file-share';
import { canonicalizedResource, stringToSign } from '../../../e2e/src/fakes/azure-files/shared-key.js';
import { fileshareError } from '../../src/connectors/fileshare/fileshare.errors.js';
import { uniqueName } from './helpers.js';
import { RawFileshare } from './fileshare.raw.js';

// How faithful the Azure Files FAKE (e2e/src/fakes/azure-files/) is: requests the real SDK sends
// are accepted, the signature is the one "Authorize with Shared Key" defines (Microsoft's own
// example), and what the service refuses is refused with the documented status, code and body.
const env = process.env;
const account = env.XFER_TEST_FILESHARE_ACCOUNT!;
const key = env.XFER_TEST_FILESHARE_KEY!;
const port = Number(env.XFER_TEST_FILESHARE_PORT);
const connectionString = env.XFER_TEST_FILESHARE_CONNECTION_STRING!;
const credential = new StorageSharedKeyCredential(account, key);

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request to the fake, exactly as given (no SDK in between). */
function send(method: string, target: string, headers: Record<string, string>, body?: Buffer): Promise<Answer> {
  return new Promise((ok, fail) => {
    const req = request({ host: '127.0.0.1', port, method, path: target, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => ok({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', fail);
    req.end(body);
  });
}

/** Headers of a request signed by hand: the string-to-sign written out as the documentation spells it. */
function signedByHand(method: string, target: string, resource: string, over: { version?: string | null; date?: string } = {}): Record<string, string> {
  const date = over.date ?? new Date().toUTCString();
  const version = over.version === undefined ? '2021-04-10' : over.version;
  const msHeaders = `x-ms-date:${date}\n${version === null ? '' : `x-ms-version:${version}\n`}`;
  const toSign = `${method}\n\n\n\n\n\n\n\n\n\n\n\n${msHeaders}${resource}`;
  return { 'x-ms-date': date, ...(version === null ? {} : { 'x-ms-version': version }), authorization: `SharedKey ${account}:${credential.computeHMACSHA256(toSign)}` };
}

/**
 * `headers` with x-ms-date, x-ms-version and an Authorization over the fake's string-to-sign
 * (checked against the documentation above), for requests the SDK would refuse to send.
 */
function signed(method: string, target: string, headers: Record<string, string>): Record<string, string> {
  const all = { ...headers, 'x-ms-date': new Date().toUTCString(), 'x-ms-version': '2021-04-10' };
  return { ...all, authorization: `SharedKey ${account}:${credential.computeHMACSHA256(stringToSign(account, { method, target, headers: all }))}` };
}

/** The documented XML error: `<Error><Code>code</Code><Message>…` and the same code in x-ms-error-code. */
function expectError(answer: Answer, status: number, code: string): void {
  expect({ status: answer.status, header: answer.headers['x-ms-error-code'], type: answer.headers['content-type'] }).toEqual({ status, header: code, type: 'application/xml' });
  expect(answer.body).toMatch(new RegExp(`^<\\?xml version="1.0" encoding="utf-8"\\?><Error><Code>${code}</Code><Message>[^<]+\\nRequestId:[0-9a-f-]{36}\\nTime:[^<]+</Message>`));
}

describe('Shared Key string-to-sign of the fake, against Microsoft\'s documented examples', () => {
  it('builds the string-to-sign of the example in "Authorize with Shared Key"', () => {
    // The documentation's example: GET of a container's metadata with timeout=20, x-ms-date and
    // x-ms-version only, account myaccount addressed path-style (hence the account twice).
    const signed = stringToSign('myaccount', {
      method: 'GET',
      target: '/myaccount/mycontainer?restype=container&comp=metadata&timeout=20',
      headers: { 'x-ms-date': 'Sun, 11 Oct 2009 21:49:13 GMT', 'x-ms-version': '2009-09-19' },
    });
    expect(signed).toBe('GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\nx-ms-version:2009-09-19\n/myaccount/myaccount/mycontainer\ncomp:metadata\nrestype:container\ntimeout:20');
  });

  it('canonicalizes resources as the documentation\'s examples do (parameters sorted, repeated ones joined)', () => {
    expect(canonicalizedResource('myaccount', '/mycontainer?restype=container&comp=metadata')).toBe('/myaccount/mycontainer\ncomp:metadata\nrestype:container');
    expect(canonicalizedResource('myaccount', '/mycontainer?restype=container&comp=list&include=snapshots&include=metadata&include=uncommittedblobs'))
      .toBe('/myaccount/mycontainer\ncomp:list\ninclude:metadata,snapshots,uncommittedblobs\nrestype:container');
    expect(canonicalizedResource('myaccount', '/mycontainer/myblob')).toBe('/myaccount/mycontainer/myblob');
  });

  it('signs Content-Length 0 as empty, standard headers in their order, x-ms- headers lower-case and sorted', () => {
    const signed = stringToSign('a', {
      method: 'put',
      target: '/a/s/f?comp=range',
      headers: { 'content-length': '0', 'content-md5': 'MD5', range: 'bytes=0-1', 'x-ms-write': 'clear', 'x-ms-date': 'D', 'x-ms-version': '2021-04-10', 'x-ms-file-request-intent': ' backup  x ' },
    });
    expect(signed).toBe('PUT\n\n\n\nMD5\n\n\n\n\n\n\nbytes=0-1\nx-ms-date:D\nx-ms-file-request-intent:backup x\nx-ms-version:2021-04-10\nx-ms-write:clear\n/a/a/s/f\ncomp:range');
  });
});

describe('the Azure Files fake against real requests', () => {
  const share = uniqueName('fidelity');
  const raw = new RawFileshare(connectionString, share, '');
  beforeAll(() => raw.create());
  afterAll(() => raw.destroy());

  it('accepts a request signed by hand as the documentation spells it, and refuses it tampered with', async () => {
    const target = `/${account}/${share}?restype=share`;
    const resource = `/${account}/${account}/${share}\nrestype:share`;
    const good = signedByHand('GET', target, resource);
    expect((await send('GET', target, good)).status).toBe(200);
    const sig = good.authorization!.slice(good.authorization!.indexOf(':') + 1);
    const flipped = `${sig[0] === 'A' ? 'B' : 'A'}${sig.slice(1)}`;
    const tampered = await send('GET', target, { ...good, authorization: `SharedKey ${account}:${flipped}` });
    expectError(tampered, 403, 'AuthenticationFailed');
    // The service's detail quotes the string it signed: here the one written by hand above.
    expect(tampered.body).toContain('<AuthenticationErrorDetail>The MAC signature found in the HTTP request');
    expect(tampered.body).toContain(`x-ms-version:2021-04-10\n/${account}/${account}/${share}\nrestype:share`);
    // A signed header changed after signing, or a query parameter added, breaks the signature.
    expectError(await send('GET', target, { ...good, 'x-ms-version': '2021-06-08' }), 403, 'AuthenticationFailed');
    expectError(await send('GET', `${target}&timeout=30`, good), 403, 'AuthenticationFailed');
    // Another account's name with this account's signature.
    expectError(await send('GET', target, { ...good, authorization: `SharedKey other${account}:${sig}` }), 403, 'AuthenticationFailed');
  });

  it('refuses a missing x-ms-version, a missing signature and a stale date with the documented errors', async () => {
    const target = `/${account}/${share}?restype=share`;
    const resource = `/${account}/${account}/${share}\nrestype:share`;
    const noVersion = await send('GET', target, signedByHand('GET', target, resource, { version: null }));
    expectError(noVersion, 400, 'MissingRequiredHeader');
    expect(noVersion.body).toContain('<HeaderName>x-ms-version</HeaderName>');
    expectError(await send('GET', target, { 'x-ms-date': new Date().toUTCString(), 'x-ms-version': '2021-04-10' }), 401, 'NoAuthenticationInformation');
    const stale = new Date(Date.now() - 20 * 60_000).toUTCString();
    expectError(await send('GET', target, signedByHand('GET', target, resource, { date: stale })), 403, 'AuthenticationFailed');
    // A HEAD answer carries the code in x-ms-error-code only (no body).
    const head = await send('HEAD', target, { ...signedByHand('HEAD', target, resource), 'x-ms-version': '2021-06-08' });
    expect({ status: head.status, code: head.headers['x-ms-error-code'], body: head.body }).toEqual({ status: 403, code: 'AuthenticationFailed', body: '' });
  });

  it('the SDK signs with a version the real service takes for Rename File (2021-04-10 or later); older ones are refused', async () => {
    const file = raw.share.rootDirectoryClient.getFileClient('versioned.txt');
    const created = await file.create(3);
    const sdkVersion = created._response.request.headers.get('x-ms-version')!;
    expect(sdkVersion >= '2021-04-10').toBe(true);
    // The fake answers with the version it was asked for, as the service does.
    expect(created._response.headers.get('x-ms-version')).toBe(sdkVersion);
    await file.rename('renamed.txt');
    expect(await raw.list('')).toEqual(['renamed.txt']);
    const target = `/${account}/${share}/again.txt?comp=rename`;
    const date = new Date().toUTCString();
    const source = `http://127.0.0.1:${port}/${account}/${share}/renamed.txt`;
    const toSign = `PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:${date}\nx-ms-file-rename-source:${source}\nx-ms-version:2020-10-02\n/${account}/${account}/${share}/again.txt\ncomp:rename`;
    const old = await send('PUT', target, { 'x-ms-date': date, 'x-ms-version': '2020-10-02', 'x-ms-file-rename-source': source, authorization: `SharedKey ${account}:${credential.computeHMACSHA256(toSign)}` });
    expectError(old, 400, 'InvalidHeaderValue');
    expect(old.body).toContain('<HeaderName>x-ms-version</HeaderName>');
  });

  it('Put Range: Content-MD5 checked (Md5Mismatch, nothing written), at most 4 MiB, never past the end', async () => {
    const file = raw.share.rootDirectoryClient.getFileClient('ranges.bin');
    await file.create(8);
    await file.uploadRange(Buffer.from('abcd'), 0, 4, { contentMD5: createHash('md5').update('abcd').digest() });
    let caught: unknown;
    await file.uploadRange(Buffer.from('efgh'), 4, 4, { contentMD5: createHash('md5').update('other').digest() }).catch((err: unknown) => (caught = err));
    expect(caught).toMatchObject({ statusCode: 400, details: { errorCode: 'Md5Mismatch' } });
    expect(fileshareError(caught, { op: 'write', path: 'ranges.bin', share, where: 'fake' }).code).toBe('TRANSIENT');
    const back = await file.download(0, undefined, { maxRetryRequests: 0 });
    let bytes = '';
    for await (const chunk of back.readableStreamBody!) bytes += (chunk as Buffer).toString('latin1');
    expect(bytes).toBe('abcd\0\0\0\0');
    await expect(file.uploadRange(Buffer.from('xyz'), 6, 3)).rejects.toMatchObject({ statusCode: 416, details: { errorCode: 'InvalidRange' } });
    await file.resize(5 * 1024 * 1024);
    const five = Buffer.alloc(4 * 1024 * 1024 + 1);
    const rangeTarget = `/${account}/${share}/ranges.bin?comp=range`;
    const tooLarge = await send('PUT', rangeTarget, signed('PUT', rangeTarget, { 'x-ms-range': `bytes=0-${five.length - 1}`, 'x-ms-write': 'update', 'content-length': String(five.length) }), five);
    expectError(tooLarge, 413, 'RequestBodyTooLarge');
  });

  it('Get File: ranges answer 206 with Content-Range, a start past the end 416, x-ms-range-get-content-md5 the range\'s MD5', async () => {
    const file = raw.share.rootDirectoryClient.getFileClient('get.txt');
    await file.create(10);
    await file.uploadRange(Buffer.from('0123456789'), 0, 10);
    const part = await file.download(2, 3, { rangeGetContentMD5: true, maxRetryRequests: 0 });
    expect({ status: part._response.status, range: part.contentRange, md5: Buffer.from(part.contentMD5!).toString('hex') }).toEqual({ status: 206, range: 'bytes 2-4/10', md5: createHash('md5').update('234').digest('hex') });
    part.readableStreamBody!.resume();
    await expect(file.download(10, undefined, { maxRetryRequests: 0 })).rejects.toMatchObject({ statusCode: 416, details: { errorCode: 'InvalidRange' } });
  });

  it('List Directories and Files pages with maxresults and an opaque NextMarker, each entry once', async () => {
    const dir = raw.share.getDirectoryClient('paged');
    await dir.create();
    for (const name of ['a', 'b', 'c', 'd', 'e']) await dir.getFileClient(name).create(1);
    await dir.getDirectoryClient('sub').create();
    const seen: string[] = [];
    let pages = 0;
    for await (const page of dir.listFilesAndDirectories().byPage({ maxPageSize: 2 })) {
      pages++;
      seen.push(...page.segment.fileItems.map((f) => f.name), ...page.segment.directoryItems.map((d) => `${d.name}/`));
      if (page.continuationToken) expect(page.continuationToken).not.toMatch(/^[a-e]$/);
    }
    expect({ pages, seen: seen.sort() }).toEqual({ pages: 3, seen: ['a', 'b', 'c', 'd', 'e', 'sub/'] });
    await expect(raw.share.getDirectoryClient('missing').listFilesAndDirectories().next()).rejects.toMatchObject({ statusCode: 404, details: { errorCode: 'ResourceNotFound' } });
    await expect(raw.share.getDirectoryClient('missing/deeper').create()).rejects.toMatchObject({ statusCode: 404, details: { errorCode: 'ParentNotFound' } });
    await expect(dir.delete()).rejects.toMatchObject({ statusCode: 409, details: { errorCode: 'DirectoryNotEmpty' } });
    const otherShare = new ShareServiceClient(`http://127.0.0.1:${port}/${account}`, credential).getShareClient(`${share}-none`);
    await expect(otherShare.rootDirectoryClient.getProperties()).rejects.toMatchObject({ statusCode: 404 });
    await expect(otherShare.getDirectoryClient('x').create()).rejects.toMatchObject({ statusCode: 404, details: { errorCode: 'ShareNotFound' } });
  });
});
