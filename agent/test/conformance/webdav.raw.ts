import { createHash } from 'node:crypto';
import { createClient, type FileStat, type WebDAVClient } from 'webdav';
import type { RawStore } from './conformance.suite.js';

/**
 * The WebDAV test server through the `webdav` npm client (not the connector's code): what a
 * conformance spec checks lands where it says, seen through the server's own protocol.
 */
export class RawWebdav implements RawStore {
  private readonly client: WebDAVClient;

  constructor(opts: { url: string; username: string; password: string; base: string }) {
    this.client = createClient(opts.url, { username: opts.username, password: opts.password });
    this.base = opts.base.replace(/\/+$/, '');
  }

  private readonly base: string;

  async list(rel: string): Promise<string[]> {
    const out: string[] = [];
    // One collection at a time (Depth 1), as the connector does; a missing one lists as nothing.
    const walk = async (dir: string): Promise<void> => {
      const items = (await this.client.getDirectoryContents(this.abs(dir)).catch(() => [])) as FileStat[];
      for (const item of items) {
        const child = dir ? `${dir}/${item.basename}` : item.basename;
        out.push(child);
        if (item.type === 'directory') await walk(child);
      }
    };
    await walk(rel);
    return out.sort();
  }

  async put(rel: string, data: Buffer): Promise<void> {
    const parts = rel.split('/').slice(0, -1);
    for (let i = 1; i <= parts.length; i++) {
      const dir = this.abs(parts.slice(0, i).join('/'));
      if (!(await this.client.exists(dir))) await this.client.createDirectory(dir);
    }
    await this.client.putFileContents(this.abs(rel), data, { overwrite: true });
  }

  async sha256(rel: string): Promise<string | null> {
    if (!(await this.client.exists(this.abs(rel)))) return null;
    const hash = createHash('sha256');
    for await (const chunk of this.client.createReadStream(this.abs(rel)) as AsyncIterable<Buffer>) hash.update(chunk);
    return hash.digest('hex');
  }

  /** Makes the base collection and its parents. */
  async mkdirs(): Promise<void> {
    await this.client.createDirectory(this.base, { recursive: true });
  }

  /** Removes the base collection with everything below it. */
  async destroy(): Promise<void> {
    await this.client.deleteFile(this.base).catch(() => undefined);
  }

  private abs(rel: string): string {
    return rel ? `${this.base}/${rel}` : this.base || '/';
  }
}
