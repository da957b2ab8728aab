import type { Workflow } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { showWorkflow, workflowCreateFlags, workflowInput } from '../../resources/workflows.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Create a workflow: steps run in order by hand, a schedule or a watcher (GET /connections, POST /workflows).';
  static override description = `--steps is a JSON array, given inline, as @FILE or as - (stdin). A step is one of:
  {"type": "transfer", "sourceConnectionId", "sourcePath", "destinationConnectionId", "destinationPath", "options"?}
  {"type": "move_source", "to": "/done/{{date:YYYY-MM-DD}}"}   (after a transfer: its verified source files go under "to")
  {"type": "delete_source"}                                      (after a transfer: its verified source files are deleted)
  {"type": "notify", "channel": "email"|"webhook_event", "subject"?, "to"?}
A transfer step's connections may be given by name: the CLI looks them up (exit 4 for an unknown name). Paths are templates ({{params.NAME}}, {{date:FORMAT}}, {{run.id}}, {{file.name}} when a watcher starts the run).
--on-failure stop (the default) skips the steps after a failed one; continue runs them.
Exit code 2 when --steps is not a JSON array of objects or the server refuses a field (its message names it, e.g. steps[0].sourcePath), 4 when a connection name is unknown.`;
  static override examples = [
    `<%= config.bin %> workflows create --name ingest --steps '[{"type":"transfer","sourceConnectionId":"partner-sftp","sourcePath":"/out","destinationConnectionId":"archive","destinationPath":"/in/{{date:YYYY-MM-DD}}"},{"type":"move_source","to":"/done"}]'`,
    '<%= config.bin %> workflows create --name nightly --steps @nightly-steps.json --on-failure continue --json | jq -r .id',
    '<%= config.bin %> workflows get 665f1c2e9b1d4a0012345678 --json | jq .steps | <%= config.bin %> workflows create --name copy-of-nightly --steps -',
  ];
  static override flags = workflowCreateFlags;

  async run(): Promise<Workflow> {
    const client = this.client();
    const f = this.flags;
    // --name and --steps are required, so both are in the input.
    const { steps, ...rest } = await workflowInput(client, f);
    const workflow = await client.workflows.create({ ...rest, name: f.name, steps: steps! });
    this.print(showWorkflow(workflow));
    return workflow;
  }
}
