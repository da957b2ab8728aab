import { Flags } from '@oclif/core';
import type { PlanAction, TransferPlan } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { planActionFlag, printPlan } from '../../resources/plans.js';
import { transferIdArg } from '../../resources/transfers.js';

export default class Plan extends BaseCommand<typeof Plan> {
  static override summary = 'Compute what a transfer job would do, and print it (POST /transfers/:id/plan, GET /transfers/:id/plan, GET /transfers/:id/plan/items).';
  static override description = `An agent serving both connections lists both sides as a run would, writes nothing, and says per file: copy, update, delete (sync) or skip, with the reason and the size. The table (ACTION, PATH, SIZE, REASON, in path order; unchanged files are only counted) is followed by the summary. With --json, one document: {plan, items}.
Apply exactly that plan with "transfers execute <id> --plan <plan id>" before it expires (1 h by default; the server's XFER_PLAN_TTL).
--show prints the latest plan instead of computing a new one; --no-wait asks for a plan and prints it while it is computed.
Exit code 7 when the plan failed (its error on stderr), 6 when no agent that runs plans (xfer-agent with sync support) serves both connections, 5 when only a relay could run the transfer, 4 when the job (or, with --show, a plan) is unknown.`;
  static override examples = [
    '<%= config.bin %> transfers plan 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> transfers plan 665f1c2e9b1d4a0012345678 --json | jq -r \'.items[] | select(.action == "delete") | .path\'',
    '<%= config.bin %> transfers plan 665f1c2e9b1d4a0012345678 --show --action skip',
  ];
  static override args = transferIdArg;
  static override flags = {
    show: Flags.boolean({ description: 'Print the latest plan of the job instead of computing a new one' }),
    wait: Flags.boolean({ description: 'Wait until the plan is ready; --no-wait prints it while it is computed', default: true, allowNo: true }),
    action: planActionFlag,
  };

  async run(): Promise<TransferPlan | undefined> {
    const client = this.client();
    const id = this.args.id;
    const plan = this.flags.show ? await client.transfers.getPlan(id) : await client.transfers.plan(id, { wait: this.flags.wait });
    if (plan.status === 'planning') {
      this.print(record({ ...plan }));
      this.note(Messages.planComputing(id, plan.id));
      return plan;
    }
    await printPlan(client, plan, { json: this.jsonEnabled(), stdout: process.stdout, action: this.flags.action as PlanAction | undefined });
    return undefined;
  }
}
