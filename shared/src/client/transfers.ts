import type { Deleted, Page } from '../schemas/common.js';
import type {
  CreateTransferRequest, ExecuteTransferResult, ListTransferFilesQuery, ListTransfersQuery, Transfer, TransferFile,
} from '../schemas/transfers.js';
import { TransferFailedError } from './errors.js';
import type { PageIterator } from './paging.js';
import { Resource, seg } from './resource.js';
import type { CallSettings } from './transport.js';

/** `/transfers`: jobs moving files between two connections. */
export class TransfersApi extends Resource {
  list(query?: ListTransfersQuery, s?: CallSettings): Promise<Page<Transfer>> { return this.page('/transfers', query, s); }
  all(query?: ListTransfersQuery, s?: CallSettings): PageIterator<Transfer> { return this.pager('/transfers', query, s); }
  get(id: string, s?: CallSettings): Promise<Transfer> { return this.data('GET', `/transfers/${seg(id)}`, s); }
  /** The job starts `queued`; run it with `execute`. */
  create(body: CreateTransferRequest, s?: CallSettings): Promise<Transfer> {
    return this.data('POST', '/transfers', { ...s, json: body });
  }

  /**
   * Runs a queued job (it waits for an agent with a free slot, then runs) and waits for its end: resolves with the summary when it completed, and
   * throws `TransferFailedError` (exit code 7) when it failed or was cancelled. The wait has no
   * time limit unless `timeoutMs` is given, since the server holds the request for the whole
   * job; giving up the wait never stops the job.
   */
  async execute(id: string, s?: CallSettings): Promise<ExecuteTransferResult> {
    const result = await this.t.json<ExecuteTransferResult>('POST', `/transfers/${seg(id)}/execute`, { timeoutMs: 0, ...s });
    if (!result.success) throw new TransferFailedError(id, result);
    return result;
  }

  /** `?wait=false`: makes the job wait for an agent and answers with it at once, queued with its `queue_position` (follow it with `get`). */
  start(id: string, s?: CallSettings): Promise<Transfer> {
    return this.data('POST', `/transfers/${seg(id)}/execute`, { ...s, query: { wait: false } });
  }

  /** queued or in-progress → cancelled (409 otherwise). */
  cancel(id: string, s?: CallSettings): Promise<Transfer> { return this.data('POST', `/transfers/${seg(id)}/cancel`, s); }
  /** failed or cancelled → queued, attempt + 1; the next run skips files already at the destination. */
  retry(id: string, s?: CallSettings): Promise<Transfer> { return this.data('POST', `/transfers/${seg(id)}/retry`, s); }
  /** Finished jobs only (409 while queued or in progress). */
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/transfers/${seg(id)}`, s); }
  /** Per-file results of every run, newest first. */
  files(id: string, query?: ListTransferFilesQuery, s?: CallSettings): Promise<Page<TransferFile>> {
    return this.page(`/transfers/${seg(id)}/files`, query, s);
  }
  allFiles(id: string, query?: ListTransferFilesQuery, s?: CallSettings): PageIterator<TransferFile> {
    return this.pager(`/transfers/${seg(id)}/files`, query, s);
  }
}
