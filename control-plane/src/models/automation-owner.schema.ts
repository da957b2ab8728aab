import { Schema } from 'mongoose';
import { AUTOMATION_OWNER_TYPES } from '@xfer/shared';

/** The owner of a schedule or watcher: the API key or user that last saved it (plugins/app/access/automation-guard.ts). */
export const ownerSchema = new Schema(
  {
    type: { type: String, required: true, enum: [...AUTOMATION_OWNER_TYPES] },
    id: { type: Schema.Types.ObjectId, required: true },
  },
  { _id: false },
);
