import type { Model, Types } from 'mongoose';
import { isDuplicateKey } from './duplicate-key.js';

/**
 * Exactly-once attempts of an outbound delivery across instances (docs/architecture.md
 * "Outbound deliveries"): the deliveries collection holds `status`, `attempts`,
 * `next_attempt_at` and `first_attempt_at`; the attempts collection has a unique index on
 * (delivery_id, n). Inserting attempt n IS the claim — exact on FerretDB, whose conditional
 * updates can have several winners. Used by the webhook and the notification deliverers.
 */
export interface AttemptStore {
  deliveries: Model<any>;
  attempts: Model<any>;
}

/** An attempt this instance won. */
export interface Claim {
  attemptId: Types.ObjectId;
  n: number;
  /** Start of the delivery's retry window. */
  firstAttemptAt: Date;
}

/**
 * Claims the next attempt of `delivery` for `instanceId`, or null when another instance has it
 * (in flight under a live lease, or it won the insert) or the delivery stopped being due. An
 * earlier attempt whose lease ended unfinished is closed as abandoned (its instance stopped).
 */
export async function claimAttempt(
  store: AttemptStore, delivery: { _id: Types.ObjectId; account_id: Types.ObjectId }, instanceId: string, leaseMs: number,
): Promise<Claim | null> {
  const now = new Date();
  const last = await store.attempts.findOne({ delivery_id: delivery._id }).sort({ n: -1 }).lean<{ _id: Types.ObjectId; n: number; finished_at: Date | null; lease_expires_at: Date }>();
  if (last && !last.finished_at && last.lease_expires_at > now) return null;
  const n = (last?.n ?? 0) + 1;
  const leaseEnd = new Date(now.getTime() + leaseMs);
  let attemptId: Types.ObjectId;
  try {
    attemptId = (await store.attempts.create({
      account_id: delivery.account_id, delivery_id: delivery._id, n, instance_id: instanceId, started_at: now, lease_expires_at: leaseEnd,
    }))._id as Types.ObjectId;
  } catch (err) {
    if (isDuplicateKey(err)) return null;
    throw err;
  }
  // Read again: it may have been finished or cancelled since it was listed as due.
  const fresh = await store.deliveries.findById(delivery._id).lean<{ status: string; next_attempt_at: Date | null; first_attempt_at: Date | null }>();
  if (!fresh || fresh.status !== 'pending' || (fresh.next_attempt_at && fresh.next_attempt_at > now)) {
    await store.attempts.deleteOne({ _id: attemptId });
    return null;
  }
  if (last && !last.finished_at) {
    await store.attempts.updateOne({ _id: last._id, finished_at: null }, {
      $set: { finished_at: now, error: 'abandoned: the instance sending it stopped before recording an outcome' },
    });
  }
  const firstAttemptAt = fresh.first_attempt_at ?? now;
  await store.deliveries.updateOne({ _id: delivery._id }, { $set: { attempts: n, next_attempt_at: leaseEnd, first_attempt_at: firstAttemptAt } });
  return { attemptId, n, firstAttemptAt };
}

/**
 * Records an attempt's outcome: the attempt first, then the delivery, so a final status means
 * every attempt is recorded. The delivery is changed only while it is pending and no later
 * attempt (claimed after this one's lease ended) owns it.
 */
export async function finishAttempt(
  store: AttemptStore, deliveryId: Types.ObjectId, claim: Claim, attempt: Record<string, unknown>, delivery: Record<string, unknown>,
): Promise<void> {
  await store.attempts.updateOne({ _id: claim.attemptId }, { $set: { finished_at: new Date(), ...attempt } });
  await store.deliveries.updateOne({ _id: deliveryId, status: 'pending', attempts: { $lte: claim.n } }, { $set: delivery });
}

/**
 * When a failed attempt is retried: after `delayMs`, if that is still inside the retry window
 * that began at `claim.firstAttemptAt`; null when the delivery has failed for good.
 */
export function retryAt(claim: Claim, delayMs: number, retryWindowMs: number, now = new Date()): Date | null {
  const next = now.getTime() + delayMs;
  return next <= claim.firstAttemptAt.getTime() + retryWindowMs ? new Date(next) : null;
}
