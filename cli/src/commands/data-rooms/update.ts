import { Flags } from '@oclif/core';
import type { DataRoom, UpdateDataRoomRequest } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { roomFlags, roomIdArg } from '../../resources/data-rooms.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Change a data room (PUT /data-rooms/:id).';
  static override description = `Only the fields given change. --clear-expiry makes the room last; a new --expires-at reopens an expired room.
Exit code 4 when the room is unknown or deleted, 2 for a bad field.`;
  static override examples = [
    '<%= config.bin %> data-rooms update 665f1c2e9b1d4a0012345678 --expires-at 2027-01-31T00:00:00Z',
    '<%= config.bin %> data-rooms update 665f1c2e9b1d4a0012345678 --name "Closing set" --clear-expiry',
  ];
  static override args = roomIdArg;
  static override flags = {
    ...roomFlags,
    'clear-expiry': Flags.boolean({ description: 'Remove the end date', exclusive: ['expires-at'] }),
  };

  async run(): Promise<DataRoom> {
    const f = this.flags;
    const body: UpdateDataRoomRequest = {
      ...(f.name !== undefined && { name: f.name }),
      ...(f.description !== undefined && { description: f.description }),
      ...(f['expires-at'] !== undefined && { expires_at: f['expires-at'] }),
      ...(f['clear-expiry'] && { expires_at: null }),
      ...(f['quota-bytes'] !== undefined && { quota_bytes: f['quota-bytes'] }),
    };
    if (Object.keys(body).length === 0) throw usageError(Messages.nothingToUpdate);
    const room = await this.client().dataRooms.update(this.args.id, body);
    this.print(record(room));
    return room;
  }
}
