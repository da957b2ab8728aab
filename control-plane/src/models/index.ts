import type { Connection } from 'mongoose';
import { accountModel } from './account.model.js';
import { apiKeyModel } from './api-key.model.js';
import { lastUseModel } from './last-use.model.js';
import { auditEventModel } from './audit-event.model.js';
import { connectionModel } from './connection.model.js';
import { rateLimitCountModel } from './rate-limit-count.model.js';
import { settingModel } from './setting.model.js';
import { userModel } from './user.model.js';
import { otpUseModel } from './otp-use.model.js';
import { agentModel } from './agent.model.js';
import { agentRequestModel } from './agent-request.model.js';
import { transferModel } from './transfer.model.js';
import { transferFileModel } from './transfer-file.model.js';
import { transferPlanModel } from './transfer-plan.model.js';
import { transferPlanBatchModel } from './transfer-plan-batch.model.js';
import { relayedAttemptModel } from './relayed-attempt.model.js';
import { relaySentFileModel } from './relay-sent-file.model.js';
import { transferQueueModel } from './transfer-queue.model.js';
import { agentSlotModel } from './agent-slot.model.js';
import { outboxEventModel } from './outbox-event.model.js';
import { fileModel } from './file.model.js';
import { webhookModel } from './webhook.model.js';
import { webhookAttemptModel, webhookDeliveryModel } from './webhook-delivery.model.js';
import { shareLinkModel } from './share-link.model.js';
import { shareDownloadModel } from './share-download.model.js';
import { loginAttemptModel } from './login-attempt.model.js';
import { setAsideLegacyRecords } from '../lib/audit-chain.js';
import { systemKeyModel } from './system-key.model.js';
import { parameterModel } from './parameter.model.js';
import { scheduleModel } from './schedule.model.js';
import { scheduleRunModel } from './schedule-run.model.js';
import { scheduleInflightModel } from './schedule-inflight.model.js';
import { watcherModel } from './watcher.model.js';
import { watcherEventModel } from './watcher-event.model.js';
import { workflowModel } from './workflow.model.js';
import { workflowRunModel } from './workflow-run.model.js';
import { workflowRunLockModel } from './workflow-run-lock.model.js';
import { dataRoomModel } from './data-room.model.js';
import { dataRoomFileModel } from './data-room-file.model.js';
import { dataRoomMemberModel } from './data-room-member.model.js';
import { notificationSettingsModel } from './notification-settings.model.js';
import { notificationAttemptModel, notificationDeliveryModel } from './notification-delivery.model.js';
import { notificationDigestItemModel } from './notification-digest-item.model.js';
import { retentionSweepModel } from './retention-sweep.model.js';
import { instanceModel } from './instance.model.js';

/** Every model, bound to one connection (one app instance, one database). */
export function registerModels(conn: Connection) {
  return {
    accounts: accountModel(conn),
    users: userModel(conn),
    otpUses: otpUseModel(conn),
    apiKeys: apiKeyModel(conn),
    lastUses: lastUseModel(conn),
    auditEvents: auditEventModel(conn),
    connections: connectionModel(conn),
    rateLimitCounts: rateLimitCountModel(conn),
    settings: settingModel(conn),
    agents: agentModel(conn),
    agentRequests: agentRequestModel(conn),
    transfers: transferModel(conn),
    transferFiles: transferFileModel(conn),
    transferPlans: transferPlanModel(conn),
    transferPlanBatches: transferPlanBatchModel(conn),
    relaySentFiles: relaySentFileModel(conn),
    relayedAttempts: relayedAttemptModel(conn),
    transferQueue: transferQueueModel(conn),
    agentSlots: agentSlotModel(conn),
    outboxEvents: outboxEventModel(conn),
    files: fileModel(conn),
    webhooks: webhookModel(conn),
    webhookDeliveries: webhookDeliveryModel(conn),
    webhookAttempts: webhookAttemptModel(conn),
    shareLinks: shareLinkModel(conn),
    shareDownloads: shareDownloadModel(conn),
    systemKeys: systemKeyModel(conn),
    loginAttempts: loginAttemptModel(conn),
    parameters: parameterModel(conn),
    schedules: scheduleModel(conn),
    scheduleRuns: scheduleRunModel(conn),
    scheduleInflight: scheduleInflightModel(conn),
    watchers: watcherModel(conn),
    watcherEvents: watcherEventModel(conn),
    workflows: workflowModel(conn),
    workflowRuns: workflowRunModel(conn),
    workflowRunLocks: workflowRunLockModel(conn),
    dataRooms: dataRoomModel(conn),
    dataRoomFiles: dataRoomFileModel(conn),
    dataRoomMembers: dataRoomMemberModel(conn),
    notificationSettings: notificationSettingsModel(conn),
    notificationDeliveries: notificationDeliveryModel(conn),
    notificationAttempts: notificationAttemptModel(conn),
    notificationDigestItems: notificationDigestItemModel(conn),
    retentionSweeps: retentionSweepModel(conn),
    instances: instanceModel(conn),
  };
}

export type Models = ReturnType<typeof registerModels>;

/** Indexes are explicit and created at start (autoIndex is off everywhere). */
export async function createIndexes(models: Models): Promise<void> {
  // Before the unique {chain, seq} index: records from before the chain would collide in it.
  await setAsideLegacyRecords(models.auditEvents.collection);
  // Replaced by {job_id, attempt, path, status} (transfer-file.model.ts): a unique index left from
  // before would still refuse a moved file's `deleted` result after its `copied` one.
  await models.transferFiles.collection.dropIndex('job_id_1_attempt_1_path_1').catch(() => undefined);
  for (const model of Object.values(models)) await model.createIndexes();
}
