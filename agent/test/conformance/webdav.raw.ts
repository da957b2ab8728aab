import { createHash } from 'node:crypto';
import { Agent } from 'node:http';
import { createClient, type FileStat, type WebDAVClient } from 'webdav';
import type { RawStore } from './conformance.suite.js';

/**
 * The WebDAV test server through the `webdav` npm client (not the connector's code): what a
 * conformance spec checks lands where it says, seen through the server's own protocol.
 */
export class RawWebdav implements RawStore {
  private readonly client: WebDAVClient;

  constructor(opts: { url: string; username: string; password: string; base: string }) {
    // A fresh connection per request: a kept-alive one the server closes as it is reused fails
    // with "socket hang up", and this client does not retry.
    this.client = createClient(opts.url, { username: opts.username, password: opts.password, httpAgent: new Agent({ keepAlive: false }) });
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
      await this.ensureDirectory(dir);
    }
    await this.client.putFileContents(this.abs(rel), data, { overwrite: true });
  }

  /** Parallel puts race to create one directory: a refusal (405 exists, 423 locked) is fine once it is there. */
  private async ensureDirectory(dir: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      if (await this.client.exists(dir)) return;
      try {
        await this.client.createDirectory(dir);
        return;
      } catch (err) {
        if (attempt >= 20) throw err;
        await new Promise((resolve) => setTimeout(resolve, 10 * (attempt + 1)));
      }
    }
  }

  async sha256(rel: string): Promise<string | null> {
    if (!(await this.client.exists(this.abs(rel)))) return null;
    const hash = createHash('sha256');
    for await (const chunk of this.client.createReadStream(this.abs(rel)) as unknown as AsyncIterable<Buffer>) hash.update(chunk);
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
