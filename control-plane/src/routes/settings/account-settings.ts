import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  RETENTION_LIMITS, UpdatePlanRequest, UpdateRetentionRequest, UpdateServicePrincipalsRequest, type PlanSetting,
  type RetentionSetting, type ServicePrincipal, type ServicePrincipalsSetting, type TestStatus,
} from '@xfer/shared';
import { BadRequestError } from '../../errors.js';
import { consoleUserOf, type StoredSetting } from '../../plugins/app/access/index.js';
import { isoOrNull } from './iso-or-null.js';

const consoleOnly = { access: { consoleOnly: true } } as const;

type Retention = { audit_days: number; deleted_files_days: number };

const presentRetention = (stored: StoredSetting<Retention> | null): RetentionSetting => ({
  audit_days: stored?.value.audit_days ?? RETENTION_LIMITS.audit_days.default,
  deleted_files_days: stored?.value.deleted_files_days ?? RETENTION_LIMITS.deleted_files_days.default,
  updated_at: isoOrNull(stored?.updated_at),
});

const presentPrincipals = (stored: StoredSetting<ServicePrincipal[]> | null): ServicePrincipalsSetting => ({
  service_principals: stored?.value ?? [],
  updated_at: isoOrNull(stored?.updated_at),
});

/** 400 naming the first repeated `field` (compared case-insensitively). */
function rejectDuplicates(list: ServicePrincipal[], field: keyof ServicePrincipal): void {
  const seen = new Set<string>();
  for (const item of list) {
    const key = item[field].trim().toLowerCase();
    if (seen.has(key)) throw new BadRequestError(`body.service_principals has a duplicate ${field} '${item[field]}'`);
    seen.add(key);
  }
}

/** Settings of the whole account: retention, plan, service principals, test status. Every role reads them. */
const accountSettings: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const accountOf = (request: FastifyRequest) => ({ accountId: consoleUserOf(request).accountId, userId: null });

  app.get('/settings/retention', { config: consoleOnly }, async (request) => {
    return { data: presentRetention(await app.settings.get<Retention>(accountOf(request), 'retention')) };
  });

  /** Only the given fields change; the others keep their stored or default value. */
  app.put('/settings/retention', { schema: { body: UpdateRetentionRequest }, config: consoleOnly }, async (request) => {
    const user = consoleUserOf(request);
    await app.settings.requireAccountAdmin(user, request, 'retention');
    const { auditMinDays } = app.config.retention;
    if (request.body.audit_days !== undefined && request.body.audit_days < auditMinDays) {
      // The operator's floor (docs/operations.md "Retention"): the sweeper would keep the records that long anyway.
      throw new BadRequestError(`body.audit_days must be at least ${auditMinDays} (this installation's minimum audit retention)`);
    }
    const owner = { accountId: user.accountId, userId: null };
    const current = presentRetention(await app.settings.get<Retention>(owner, 'retention'));
    const value: Retention = {
      audit_days: request.body.audit_days ?? current.audit_days,
      deleted_files_days: request.body.deleted_files_days ?? current.deleted_files_days,
    };
    const stored = await app.settings.put(request, owner, 'retention', value, { ...value });
    return { data: presentRetention(stored) };
  });

  app.get('/settings/service-principals', { config: consoleOnly }, async (request) => {
    return { data: presentPrincipals(await app.settings.get<ServicePrincipal[]>(accountOf(request), 'service-principals')) };
  });

  /**
   * Replaces the whole list: names and client ids are unique within it. The API keys issued for a
   * principal left out are revoked.
   */
  app.put('/settings/service-principals', { schema: { body: UpdateServicePrincipalsRequest }, config: consoleOnly }, async (request) => {
    const user = consoleUserOf(request);
    await app.settings.requireAccountAdmin(user, request, 'service-principals');
    const list = request.body.service_principals.map((p) => ({ name: p.name.trim(), client_id: p.client_id }));
    rejectDuplicates(list, 'name');
    rejectDuplicates(list, 'client_id');
    const owner = { accountId: user.accountId, userId: null };
    const before = (await app.settings.get<ServicePrincipal[]>(owner, 'service-principals'))?.value ?? [];
    const stored = await app.settings.put(request, owner, 'service-principals', list, {
      count: list.length, client_ids: list.map((p) => p.client_id),
    });
    // A principal no longer registered loses its keys at once (each revocation audited).
    const kept = new Set(list.map((p) => p.client_id));
    await app.apiKeys.revokeForPrincipals(request, user.accountId, before.map((p) => p.client_id).filter((id) => !kept.has(id)));
    return { data: presentPrincipals(stored) };
  });

  const presentPlan = (p: { plan: PlanSetting['plan']; updated_at: Date | null }): PlanSetting => ({ plan: p.plan, updated_at: isoOrNull(p.updated_at) });

  app.get('/settings/plan', { config: consoleOnly }, async (request) => {
    return { data: presentPlan(await app.settings.plan(consoleUserOf(request).accountId)) };
  });

  /** An owner changes the plan; the Team rules apply from the next request (settings.service.ts `changePlan`). */
  app.put('/settings/plan', { schema: { body: UpdatePlanRequest }, config: consoleOnly }, async (request) => {
    return { data: presentPlan(await app.settings.changePlan(consoleUserOf(request), request, request.body.plan)) };
  });

  /** Whether this control plane reaches its database, and how fast. 200 either way: it is a report. */
  app.get('/settings/test-status', { config: consoleOnly }, async (request) => {
    consoleUserOf(request);
    const started = performance.now();
    let latency: number | null = null;
    try {
      await app.dbConnection.db!.command({ ping: 1 });
      latency = Math.round(performance.now() - started);
    } catch (err) {
      request.log.warn({ err }, 'test-status: database ping failed');
    }
    const data: TestStatus = {
      status: latency === null ? 'degraded' : 'ok',
      database: latency === null ? 'unavailable' : 'ok',
      database_latency_ms: latency,
      checked_at: new Date().toISOString(),
    };
    return { data };
  });
};

export default accountSettings;
