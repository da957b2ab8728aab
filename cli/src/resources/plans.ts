import { Errors, Flags } from '@oclif/core';
import { ExitCode, PLAN_ACTIONS, type PlanAction, type PlanItem, type PlanSummary, type TransferPlan, type XferClient } from '@xfer/shared';
import { TableWriter, type Column } from '../output.js';
import { formatBytes } from '../progress/index.js';

/**
 * Plans of transfers in the CLI (`xfer transfers plan`, `xfer sync`; docs/cli.md): the items as a
 * table (action, path, size, reason) in path order, written a page at a time, then the summary.
 */
export const planItemColumns: Column<PlanItem>[] = [
  { header: 'action', get: (i) => i.action },
  { header: 'path', get: (i) => i.path },
  // A deletion's size is the destination file's; the others' the source file's.
  { header: 'size', get: (i) => formatBytes((i.action === 'delete' ? i.destination?.size : i.source?.size) ?? i.destination?.size ?? 0) },
  { header: 'reason', get: (i) => i.reason },
];

export const planActionFlag = Flags.string({
  description: 'Show only the items of this action (default: copy, update and delete; skipped files are only counted)', options: [...PLAN_ACTIONS],
});

/** The summary as one line: `3 to copy (30 B), 1 to update (10 B), 1 to delete (10 B), 7 unchanged`, and a refusal of the deletions. */
export function summaryLine(s: PlanSummary): string {
  const line = `${s.copy} to copy (${formatBytes(s.copy_bytes)}), ${s.update} to update (${formatBytes(s.update_bytes)}), `
    + `${s.delete} to delete (${formatBytes(s.delete_bytes)}), ${s.skip} unchanged`;
  return s.delete_refused ? `${line}\nDeletions refused: ${s.delete_refused}` : line;
}

/** Writes, waiting while the reader is behind. */
async function write(stream: NodeJS.WritableStream, text: string): Promise<void> {
  if (!stream.write(text)) await new Promise<void>((resolve) => stream.once('drain', resolve));
}

const indent = (value: unknown) => JSON.stringify(value, null, 2).replace(/\n/g, '\n  ');

export interface PlanOutput {
  json: boolean;
  stdout: NodeJS.WritableStream;
  /** Only this action; default every action but `skip`. */
  action?: PlanAction;
  /** Other fields of the JSON document, before `plan` (`xfer sync --dry-run`: `transfer`). */
  extra?: Record<string, unknown>;
}

/**
 * Prints a plan: its items (a page at a time, so memory holds one page however large the plan),
 * then the summary, or with `json` one document `{…extra, plan, items}`. A failed plan prints its
 * error and exits 7, as a failed transfer does.
 */
export async function printPlan(client: XferClient, plan: TransferPlan, out: PlanOutput): Promise<void> {
  const shown = (i: PlanItem) => (out.action ? i.action === out.action : i.action !== 'skip');
  if (out.json) {
    const head = Object.entries({ ...out.extra, plan }).map(([k, v]) => `  ${JSON.stringify(k)}: ${indent(v)}`).join(',\n');
    await write(out.stdout, `{\n${head},\n  "items": [`);
  }
  let count = 0;
  if (plan.status === 'ready') {
    const tableWriter = new TableWriter(planItemColumns);
    for await (const page of client.transfers.allPlanItems(plan.transferId, { limit: 1000, ...(out.action ? { action: out.action } : {}) }).pages()) {
      const items = page.data.filter(shown);
      if (items.length === 0) continue;
      const text = out.json
        ? items.map((item, i) => `${count + i === 0 ? '\n' : ',\n'}    ${indent(item).replace(/\n/g, '\n  ')}`).join('')
        : tableWriter.page(items) + '\n';
      await write(out.stdout, text);
      count += items.length;
    }
  }
  if (out.json) await write(out.stdout, `${count > 0 ? '\n  ' : ''}]\n}\n`);
  else if (plan.status === 'ready') {
    await write(out.stdout, `${count === 0 ? 'Nothing to do.\n' : ''}Plan ${plan.id}: ${summaryLine(plan.summary!)}\n`);
  } else await write(out.stdout, `Plan ${plan.id}: ${plan.status}${plan.error ? `: ${plan.error}` : ''}\n`);
  if (plan.status === 'failed') throw planFailed(plan);
}

/** The error of a failed plan: exit 7, as a failed transfer. */
export function planFailed(plan: TransferPlan): Errors.CLIError {
  return new Errors.CLIError(`Plan ${plan.id} failed: ${plan.error ?? 'no reason given'}`, { exit: ExitCode.transferFailed });
}
