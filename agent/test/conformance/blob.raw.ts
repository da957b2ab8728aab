import { createHash } from 'node:crypto';
import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';
import type { RawStore } from './conformance.suite.js';

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
