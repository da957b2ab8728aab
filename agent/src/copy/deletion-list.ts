import { createReadStream } from 'node:fs';
import { appendFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** A destination file a `sync` deletes once every copy of the run is verified. */
export interface PendingDeletion {
  path: string;
  size: number;
}

/** Deletions held in memory before the rest go to a file (about 100 bytes each). */
const IN_MEMORY = 10_000;

/**
 * The deletions a `sync` found while comparing, kept until every copy of the run is verified
 * (docs/agent.md "Sync, move and plans": deletion safety). The first 10,000 are held in memory;
 * more are appended to a private temporary file (JSON lines, mode 0600) and read back one line at
 * a time: memory stays bounded however many files the source lost.
 */
export class DeletionList {
  private readonly memory: PendingDeletion[] = [];
  private file: string | null = null;
  private dir: string | null = null;
  private pending: string[] = [];
  private writing: Promise<void> = Promise.resolve();
  count = 0;
  bytes = 0;

  add(deletion: PendingDeletion): void {
    this.count++;
    this.bytes += deletion.size;
    if (this.memory.length < IN_MEMORY) {
      this.memory.push(deletion);
      return;
    }
    this.pending.push(JSON.stringify(deletion));
    if (this.pending.length >= 1000) this.flush();
  }

  /** Every deletion, in the order added. */
  async *[Symbol.asyncIterator](): AsyncGenerator<PendingDeletion> {
    yield* this.memory;
    this.flush();
    await this.writing;
    if (!this.file) return;
    const lines = createInterface({ input: createReadStream(this.file, 'utf8'), crlfDelay: Infinity });
    for await (const line of lines) if (line) yield JSON.parse(line) as PendingDeletion;
  }

  /** Removes the temporary file. */
  async dispose(): Promise<void> {
    await this.writing.catch(() => undefined);
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    const text = `${this.pending.join('\n')}\n`;
    this.pending = [];
    this.writing = this.writing.then(async () => {
      if (!this.file) {
        this.dir = await mkdtemp(join(tmpdir(), 'xfer-deletions-'));
        this.file = join(this.dir, 'deletions.jsonl');
      }
      await appendFile(this.file, text, { mode: 0o600 });
    });
  }
}
