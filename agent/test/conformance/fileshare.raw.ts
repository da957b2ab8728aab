import { createHash } from 'node:crypto';
import { ShareServiceClient, type ShareClient, type ShareDirectoryClient } from '@azure/storage-file-share';
import type { RawStore } from './conformance.suite.js';

/**
 * The Azure Files test server through a plain client of its own (the SDK, not the connector's
 * code), on one share, below `base` ('' or 'a/b').
 */
export class RawFileshare implements RawStore {
  readonly share: ShareClient;

  constructor(connectionString: string, readonly shareName: string, private readonly base: string) {
    this.share = ShareServiceClient.fromConnectionString(connectionString).getShareClient(shareName);
  }

  /** Creates the share and the base directory with its parents. */
  async create(): Promise<void> {
    await this.share.create();
    await this.mkdirs(this.base);
  }

  /** Every file and directory below `rel`, relative to the base, sorted. */
  async list(rel: string): Promise<string[]> {
    const out: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      let items;
      try {
        items = [];
        for await (const item of this.dir(dir).listFilesAndDirectories()) items.push(item);
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode === 404) return;
        throw err;
      }
      for (const item of items) {
        const p = dir === '' ? item.name : `${dir}/${item.name}`;
        out.push(p);
        if (item.kind === 'directory') await walk(p);
      }
    };
    await walk(rel);
    return out.sort();
  }

  async put(rel: string, data: Buffer): Promise<void> {
    const parts = rel.split('/');
    await this.mkdirs(parts.slice(0, -1).join('/'));
    const file = this.share.rootDirectoryClient.getFileClient(this.path(rel));
    await file.create(data.length);
    for (let offset = 0; offset < data.length; offset += 4 * 1024 * 1024) {
      const range = data.subarray(offset, offset + 4 * 1024 * 1024);
      await file.uploadRange(range, offset, range.length);
    }
  }

  async sha256(rel: string): Promise<string | null> {
    let body: NodeJS.ReadableStream | undefined;
    try {
      body = (await this.share.rootDirectoryClient.getFileClient(this.path(rel)).download()).readableStreamBody;
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return null;
      throw err;
    }
    const hash = createHash('sha256');
    for await (const chunk of body ?? []) hash.update(chunk as Buffer);
    return hash.digest('hex');
  }

  /** Deletes the share with everything in it. */
  async destroy(): Promise<void> {
    await this.share.deleteIfExists();
  }

  /** Creates `rel` (relative to the base) and its parents, each once. */
  private async mkdirs(rel: string): Promise<void> {
    const parts = this.path(rel).split('/').filter((p) => p !== '');
    for (let i = 1; i <= parts.length; i++) await this.share.getDirectoryClient(parts.slice(0, i).join('/')).createIfNotExists();
  }

  private dir(rel: string): ShareDirectoryClient {
    const p = this.path(rel);
    return p === '' ? this.share.rootDirectoryClient : this.share.getDirectoryClient(p);
  }

  private path(rel: string): string {
    return this.base === '' ? rel : rel === '' ? this.base : `${this.base}/${rel}`;
  }
}
