import { Schema } from 'mongoose';

/**
 * A value as `Vault.seal` stores it (lib/vault.ts `Sealed`): AES-256-GCM ciphertext naming its
 * master key. Embedded as a sub-document (no `_id`) wherever a secret is kept at rest.
 */
export const sealedSchema = new Schema(
  {
    /** Format: 2 bound to its record (additional data), absent for format 1 (lib/vault.ts). */
    v: { type: Number },
    kid: { type: String, required: true },
    iv: { type: String, required: true },
    tag: { type: String, required: true },
    data: { type: String, required: true },
  },
  { _id: false },
);
