import type { DataRoom } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { roomCreateFlags } from '../../resources/data-rooms.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Create a data room (POST /data-rooms).';
  static override description = `A room opens files of the store to outside parties: add files with "data-rooms files add" or "data-rooms files upload", invite people with "data-rooms members add".
After --expires-at every invite answers 410 until the room is given a later end. Exit code 2 for a bad field (e.g. an --expires-at in the past).`;
  static override examples = [
    '<%= config.bin %> data-rooms create --name "Acquisition Q3" --description "Due diligence" --expires-at 2026-12-31T23:59:59Z',
    'room=$(<%= config.bin %> data-rooms create --name Audit --json | jq -r .id)',
  ];
  static override flags = roomCreateFlags;

  async run(): Promise<DataRoom> {
    const f = this.flags;
    const room = await this.client().dataRooms.create({
      name: f.name, ...(f.description !== undefined && { description: f.description }), ...(f['expires-at'] !== undefined && { expires_at: f['expires-at'] }),
      ...(f['quota-bytes'] !== undefined && { quota_bytes: f['quota-bytes'] }),
    });
    this.print(record(room));
    return room;
  }
}
