import { createHash } from 'node:crypto';
import { AccountSASPermissions, AccountSASResourceTypes, AccountSASServices, BlobServiceClient, StorageSharedKeyCredential, generateAccountSASQueryParameters, type ContainerClient } from '@azure/storage-blob';
import type { RawStore } from './conformance.suite.js';

/** The Azurite of `npm run services` (e2e/src/services/azurite.service.ts), from the XFER_TEST_BLOB_* variables jest's global setup sets. */
export const blobTestServer = {
  connectionString: process.env.XFER_TEST_BLOB_CONNECTION_STRING!,
  endpoint: process.env.XFER_TEST_BLOB_ENDPOINT!,
  port: Number(process.env.XFER_TEST_BLOB_PORT),
  account: process.env.XFER_TEST_BLOB_ACCOUNT!,
  key: process.env.XFER_TEST_BLOB_KEY!,
};

/** A connection string like the test server's, with `endpoint`, account name or key replaced. */
export function blobConnectionString(over: { endpoint?: string; account?: string; key?: string } = {}): string {
  const s = blobTestServer;
  return `DefaultEndpointsProtocol=http;AccountName=${over.account ?? s.account};AccountKey=${over.key ?? s.key};BlobEndpoint=${over.endpoint ?? s.endpoint};`;
}

/** The test account through a read-and-list-only account SAS (writes are refused with AuthorizationPermissionMismatch), at `endpoint`. */
export function readListSasConnectionString(endpoint = blobTestServer.endpoint): string {
  const sas = generateAccountSASQueryParameters({
    permissions: AccountSASPermissions.parse('rl'),
    services: AccountSASServices.parse('b').toString(),
    resourceTypes: AccountSASResourceTypes.parse('sco').toString(),
    expiresOn: new Date(Date.now() + 3_600_000),
  }, new StorageSharedKeyCredential(blobTestServer.account, blobTestServer.key)).toString();
  return `BlobEndpoint=${endpoint};SharedAccessSignature=${sas}`;
}

/**
 * The Blob test server through a plain client of its own (not the connector's code), on one
 * container, below `prefix` ('' or 'a/b').
 */
export class RawBlob implements RawStore {
  private readonly container: ContainerClient;

  constructor(connectionString: string, readonly containerName: string, private readonly prefix: string) {
    this.container = BlobServiceClient.fromConnectionString(connectionString).getContainerClient(containerName);
  }

  async createContainer(): Promise<void> {
    await this.container.create();
  }

  /** Every committed blob below `rel` (markers without their slash), relative to the base, sorted. */
  async list(rel: string): Promise<string[]> {
    const start = this.name(rel) === '' ? '' : `${this.name(rel)}/`;
    const root = this.prefix === '' ? '' : `${this.prefix}/`;
    const out: string[] = [];
    for await (const item of this.container.listBlobsFlat({ prefix: start })) out.push(item.name.slice(root.length).replace(/\/$/, ''));
    return out.sort();
  }

  async put(rel: string, data: Buffer): Promise<void> {
    await this.container.getBlockBlobClient(this.name(rel)).upload(data, data.length);
  }

  async sha256(rel: string): Promise<string | null> {
    const blob = this.container.getBlobClient(this.name(rel));
    let body: NodeJS.ReadableStream | undefined;
    try {
      body = (await blob.download()).readableStreamBody;
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return null;
      throw err;
    }
    const hash = createHash('sha256');
    for await (const chunk of body ?? []) hash.update(chunk as Buffer);
    return hash.digest('hex');
  }

  async remove(rel: string): Promise<void> {
    await this.container.getBlobClient(this.name(rel)).deleteIfExists();
  }

  /** Deletes the container with everything in it. */
  async destroy(): Promise<void> {
    await this.container.deleteIfExists();
  }

  private name(rel: string): string {
    return this.prefix === '' ? rel : rel === '' ? this.prefix : `${this.prefix}/${rel}`;
  }
}
