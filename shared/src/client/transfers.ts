import type { Deleted, Page } from '../schemas/common.js';
import type {
  CreateTransferRequest, ExecuteTransferResult, ListTransferFilesQuery, ListTransfersQuery, Transfer, TransferFile,
} from '../schemas/transfers.js';
import type { ListPlanItemsQuery, TransferPlan, TransferPlanItem } from '../schemas/plans.js';
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

  /**
   * Runs the job applying exactly plan `planId` (`plan`; ready, not expired, and the transfer
   * unchanged since: 409/410 otherwise) and waits for its end, as `execute`.
   */
  async executePlan(id: string, planId: string, s?: CallSettings): Promise<ExecuteTransferResult> {
    const result = await this.t.json<ExecuteTransferResult>('POST', `/transfers/${seg(id)}/execute`, { timeoutMs: 0, ...s, json: { plan_id: planId } });
    if (!result.success) throw new TransferFailedError(id, result);
    return result;
  }

  /** `executePlan` with `?wait=false`: answers with the waiting job at once. */
  startPlan(id: string, planId: string, s?: CallSettings): Promise<Transfer> {
    return this.data('POST', `/transfers/${seg(id)}/execute`, { ...s, query: { wait: false }, json: { plan_id: planId } });
  }

  /**
   * Computes a new plan of the job on an agent (it lists both sides and writes nothing) and waits
   * until it is `ready` or `failed`; `wait: false` answers at once with it `planning` (follow it with `getPlan`).
   */
  plan(id: string, options: { wait?: boolean } = {}, s?: CallSettings): Promise<TransferPlan> {
    return this.data('POST', `/transfers/${seg(id)}/plan`, { timeoutMs: 0, ...s, ...(options.wait === false ? { query: { wait: false } } : {}) });
  }

  /** The job's latest plan (404 when it has none). */
  getPlan(id: string, s?: CallSettings): Promise<TransferPlan> { return this.data('GET', `/transfers/${seg(id)}/plan`, s); }

  /** The latest plan's items in path order, one page; `action` narrows them. */
  planItems(id: string, query?: ListPlanItemsQuery, s?: CallSettings): Promise<Page<TransferPlanItem>> {
    return this.page(`/transfers/${seg(id)}/plan/items`, query, s);
  }
  allPlanItems(id: string, query?: ListPlanItemsQuery, s?: CallSettings): PageIterator<TransferPlanItem> {
    return this.pager(`/transfers/${seg(id)}/plan/items`, query, s);
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
