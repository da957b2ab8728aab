import { Flags } from '@oclif/core';
import type { ActivitySummary } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';

export default class Summary extends BaseCommand<typeof Summary> {
  static override summary = "Show the account's dashboard counters over a time window (GET /activity/summary).";
  static override description = `Counts over [--from, --to): the transfers created in the window by their status now, the bytes and files they moved and the agents that ran them (active_agents), and the uploads, downloads and blocked uploads (malware) the audit trail recorded. --to defaults to now, --from to 24 hours before --to; the window is at most 366 days. Needs activity:read.
A --from/--to that is not an ISO 8601 time, or a window the server refuses, is exit code 2.`;
  static override examples = [
    '<%= config.bin %> activity summary',
    '<%= config.bin %> activity summary --from 2026-01-01T00:00:00Z --to 2026-02-01T00:00:00Z --json | jq .bytes_moved',
  ];
  static override flags = {
    from: Flags.string({ description: 'Start of the window (inclusive), ISO 8601, e.g. 2026-01-31T00:00:00Z; default 24 hours before --to' }),
    to: Flags.string({ description: 'End of the window (exclusive), ISO 8601; default now' }),
  };

  async run(): Promise<ActivitySummary> {
    const summary = await this.client().activity.summary({ from: this.flags.from, to: this.flags.to });
    const { transfers, ...rest } = summary;
    this.print(record({ ...rest, transfers: transfers.total, ...Object.fromEntries(Object.entries(transfers.by_status).map(([k, v]) => [`transfers ${k}`, v])) }));
    return summary;
  }
}
