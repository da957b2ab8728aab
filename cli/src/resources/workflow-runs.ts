import { Command, Errors } from '@oclif/core';
import { ApiError, ExitCode, exitCodeOf, type Transfer, type WorkflowRun, type WorkflowRunStatus, type XferClient } from '@xfer/shared';
import { BaseCommand } from '../base-command.js';
import { Messages } from '../messages.js';
import { errorLine } from '../output.js';
import { createProgress, progressMode, writeLine, type ProgressDisplay } from '../progress/index.js';
import { progressOf } from './transfers.js';
import { showRun, stepLine, transferFigures } from './workflows.js';

/** The states a run ends in. */
const FINISHED: readonly WorkflowRunStatus[] = ['completed', 'failed', 'cancelled'];
export const isRunFinished = (status: WorkflowRunStatus): boolean => FINISHED.includes(status);

/** As for a transfer: first poll soon (short runs end fast), then slower up to once a second. */
const POLL_MIN_MS = 200;
const POLL_MAX_MS = 1000;

/** An ApiError while following: the run is not affected; say how to pick it up again. */
function pollFailed(id: string, err: unknown): unknown {
  return err instanceof ApiError ? new Errors.CLIError(Messages.runPollFailed(id, err.message), { exit: exitCodeOf(err) }) : err;
}

/**
 * What following a run shows on stderr: a line when the run's or a step's status changes (not
 * for pending: every step starts so), and, while a transfer step runs, its transfer's progress (the live view or plain lines of
 * `transfers watch`, one display per step so rates do not mix transfers). Nothing in mode `none`.
 */
class RunReporter {
  private told: WorkflowRun | undefined;
  private view: { step: number; display: ProgressDisplay } | undefined;
  /** Transfers this caller may not read (a key without transfers:read, a deleted transfer): shown without figures. */
  private readonly unreadable = new Set<string>();

  constructor(private readonly client: XferClient, private readonly mode: ReturnType<typeof progressMode>) {}

  async tell(run: WorkflowRun): Promise<void> {
    if (this.mode === 'none') return;
    // A run that starts is told before its steps; one that ended after them (they say why).
    const runChanged = this.told?.status !== run.status;
    if (runChanged && !isRunFinished(run.status)) writeLine(Messages.runState(run.id, run.status));
    for (const [i, step] of run.steps.entries()) {
      const changed = this.told?.steps[i]?.status !== step.status;
      const transfer = step.type === 'transfer' && step.transfer_id ? step.transfer_id : null;
      if (step.status === 'running') {
        if (changed) writeLine(stepLine(run, i));
        if (transfer) await this.showTransfer(run, i, transfer);
      } else if (changed && step.status !== 'pending') {
        // The last figures of a transfer step that ended (also one that ended between two polls).
        const t = transfer && step.status !== 'skipped' ? await this.transfer(transfer) : null;
        if (t && this.view?.step === i) this.view.display.update(this.progress(run, i, t));
        if (this.view?.step === i) this.stopView();
        writeLine(stepLine(run, i, t ? transferFigures(t) : undefined));
      }
    }
    if (runChanged && isRunFinished(run.status)) writeLine(Messages.runState(run.id, run.status));
    this.told = run;
  }

  stopView(): void {
    this.view?.display.stop();
    this.view = undefined;
  }

  private async showTransfer(run: WorkflowRun, i: number, id: string): Promise<void> {
    const t = await this.transfer(id);
    if (!t) return;
    if (this.view?.step !== i) {
      this.stopView();
      this.view = { step: i, display: await createProgress(this.mode) };
    }
    this.view.display.update(this.progress(run, i, t));
  }

  private progress(run: WorkflowRun, i: number, t: Transfer) {
    return { ...progressOf(t), label: `Step ${i + 1}/${run.steps.length} transfer` };
  }

  private async transfer(id: string): Promise<Transfer | null> {
    if (this.unreadable.has(id)) return null;
    try {
      return await this.client.transfers.get(id);
    } catch (err) {
      if (err instanceof ApiError && (err.kind === 'not_found' || err.kind === 'forbidden')) {
        this.unreadable.add(id);
        return null;
      }
      throw err;
    }
  }
}

/**
 * Polls a run (GET /workflow-runs/:id, and GET /transfers/:id for a running transfer step's
 * figures) until it ends, telling its progress on stderr, and returns its last state. Ctrl-C
 * stops following at once (exit 130); the run carries on on the server.
 */
export async function followRun(client: XferClient, start: WorkflowRun, o: { quiet: boolean; json: boolean }): Promise<WorkflowRun> {
  const id = start.id;
  const reporter = new RunReporter(client, progressMode(o));
  const onSigint = () => {
    reporter.stopView();
    process.stderr.write(errorLine(Messages.stoppedFollowingRun(id), o.json));
    process.exit(130);
  };
  process.on('SIGINT', onSigint);
  try {
    let current = start;
    let delay = POLL_MIN_MS;
    for (;;) {
      await reporter.tell(current).catch((err: unknown) => { throw pollFailed(id, err); });
      if (isRunFinished(current.status)) return current;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(POLL_MAX_MS, delay * 1.5);
      current = await client.workflows.getRun(id).catch((err: unknown) => { throw pollFailed(id, err); });
    }
  } finally {
    process.off('SIGINT', onSigint);
    reporter.stopView();
  }
}

/**
 * workflows run --follow and workflow-runs watch: follow a run to its end, then print it (stdout,
 * `--json` included) and exit 0 when it completed, 7 (as for a failed transfer) with the run's
 * error as the one stderr line when it failed or was cancelled.
 */
export abstract class RunFollowCommand<T extends typeof Command> extends BaseCommand<T> {
  protected async followToEnd(client: XferClient, start: WorkflowRun): Promise<WorkflowRun> {
    const flags = this.flags as unknown as { quiet?: boolean };
    const final = await followRun(client, start, { quiet: flags.quiet ?? false, json: this.jsonEnabled() });
    if (final.status === 'completed') {
      this.print(showRun(final));
      return final;
    }
    // oclif prints `run()`'s result only on success; a script still gets the final run on stdout.
    if (this.jsonEnabled()) this.logJson(final);
    else this.log(showRun(final));
    throw new Errors.CLIError(Messages.runEnded(final.id, final.status, final.error), { exit: ExitCode.transferFailed });
  }
}
