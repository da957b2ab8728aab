import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Types } from 'mongoose';
import { CreateUserRequest, Deleted, Envelope, IdParams, Page, PageQuery, UpdateUserRequest, User, type Role } from '@xfer/shared';
import { ConflictError, NotFoundError } from '../../errors.js';
import { hashPassword } from '../../lib/crypto.js';
import { paginate, toObjectId } from '../../lib/pagination.js';
import { principalOf, requireRoleWithin, requireUserWithin } from '../../plugins/app/access/index.js';
import { presentUser, requireOwnerFor, withoutLosingLastOwner } from '../../plugins/app/access/users.service.js';

const DUPLICATE_KEY = 11000;

/**
 * Users of the caller's account (users:read for reads, users:write for changes).
 *
 * Rules: only an owner creates owners, promotes to owner, or changes or deletes an owner; an
 * account always keeps at least one owner (409); nobody deletes their own user (409). An API key
 * with users:write acts with admin power, never owner power (see `actingRole`). A caller gives,
 * changes or deletes only roles whose scopes it holds (lib/grant-rules.ts). A password change
 * ends every session of that user (sessions_valid_after = now).
 */
const users: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  /** Runs a rule check whose refusal is written to the audit trail (with `reason`) before the 403. */
  async function audited(request: FastifyRequest, action: string, resourceId: string | null, reason: string, check: () => void) {
    try {
      check();
    } catch (err) {
      await app.audit.recordRequest(request, { action, outcome: 'denied', resource: { type: 'user', id: resourceId }, details: { reason } });
      throw err;
    }
  }

  const ownerOnly = (request: FastifyRequest, action: string, resourceId: string | null, what: string) =>
    audited(request, action, resourceId, `only an owner can ${what}`, () => requireOwnerFor(principalOf(request), what));

  /** An escalation check (lib/grant-rules.ts). */
  const withinCaller = (request: FastifyRequest, action: string, resourceId: string | null, check: () => void) =>
    audited(request, action, resourceId, 'scope escalation', check);

  async function findUser(accountId: string, rawId: string) {
    const id = toObjectId(rawId);
    const user = id && await app.db.users.findOne({ _id: id, account_id: accountId }).lean();
    if (!user) throw new NotFoundError(`User ${rawId} not found`);
    return user;
  }

  app.get('/users', {
    schema: { querystring: PageQuery, response: { 200: Page(User) } },
    config: { access: { scope: 'users:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return paginate(app.db.users, { account_id: accountId }, request.query, presentUser);
  });

  app.post('/users', {
    schema: { body: CreateUserRequest, response: { 201: Envelope(User) } },
    config: { access: { scope: 'users:write' } },
  }, async (request, reply) => {
    const principal = principalOf(request);
    const { accountId } = principal;
    const { role, password } = request.body;
    if (role === 'owner') await ownerOnly(request, 'user.create', null, 'create owners');
    await withinCaller(request, 'user.create', null, () => requireRoleWithin(principal, role, 'create'));
    const email = request.body.email.trim().toLowerCase();
    const conflict = () => new ConflictError(`A user with email ${email} already exists`);
    if (await app.db.users.exists({ email })) throw conflict();
    const _id = new Types.ObjectId();
    const passwordHash = await hashPassword(password);
    // Recorded write-ahead (plugins/app/audit.ts `change`).
    const doc = await app.audit.change(request, async (announce) => {
      await announce({ action: 'user.create', outcome: 'success', resource: { type: 'user', id: String(_id) }, details: { email, role } });
      try {
        return await app.db.users.create({
          _id,
          account_id: accountId,
          email,
          name: request.body.name?.trim() ?? email.split('@')[0]!,
          role,
          password_hash: passwordHash,
        });
      } catch (err) {
        if ((err as { code?: number }).code === DUPLICATE_KEY) throw conflict();
        throw err;
      }
    });
    const user = presentUser(doc.toObject());
    return reply.code(201).send({ data: user });
  });

  app.get('/users/:id', {
    schema: { params: IdParams, response: { 200: Envelope(User) } },
    config: { access: { scope: 'users:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return { data: presentUser(await findUser(accountId, request.params.id)) };
  });

  app.put('/users/:id', {
    schema: { params: IdParams, body: UpdateUserRequest, response: { 200: Envelope(User) } },
    config: { access: { scope: 'users:write' } },
  }, async (request) => {
    const principal = principalOf(request);
    const { accountId } = principal;
    const target = await findUser(accountId, request.params.id);
    const targetId = String(target._id);
    const { name, role, password } = request.body;
    if (target.role === 'owner') await ownerOnly(request, 'user.update', targetId, 'change an owner');
    if (role === 'owner' && target.role !== 'owner') await ownerOnly(request, 'user.update', targetId, 'promote a user to owner');
    await withinCaller(request, 'user.update', targetId, () => {
      requireUserWithin(principal, target.role as Role, 'change');
      if (role !== undefined) requireRoleWithin(principal, role, 'promote');
    });

    const now = new Date();
    const set: Record<string, unknown> = { updated_at: now };
    if (name !== undefined) set.name = name.trim();
    if (role !== undefined) set.role = role;
    if (password !== undefined) {
      set.password_hash = await hashPassword(password);
      set.sessions_valid_after = now;
    }
    const apply = () => app.db.users.findOneAndUpdate({ _id: target._id, account_id: accountId }, { $set: set }, { new: true }).lean();
    // Recorded write-ahead (plugins/app/audit.ts `change`).
    const updated = await app.audit.change(request, async (announce) => {
      await announce({
        action: 'user.update', outcome: 'success', resource: { type: 'user', id: targetId },
        details: {
          fields: Object.keys(request.body).sort(),
          ...(role !== undefined && role !== target.role ? { role_from: target.role, role_to: role } : {}),
          ...(password !== undefined ? { sessions_revoked: true } : {}),
        },
      });
      let result;
      if (target.role === 'owner' && role !== undefined && role !== 'owner') {
        // Undo puts back exactly the fields this request set, as they were before it.
        const before = Object.fromEntries(Object.keys(set).map((k) => [k, target[k as keyof typeof target]]));
        result = await withoutLosingLastOwner(app.db, accountId, apply, async () => {
          await app.db.users.updateOne({ _id: target._id }, { $set: before });
        });
      } else {
        result = await apply();
      }
      if (!result) throw new NotFoundError(`User ${request.params.id} not found`);
      return result;
    });
    return { data: presentUser(updated) };
  });

  app.delete('/users/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: { access: { scope: 'users:write' } },
  }, async (request) => {
    const principal = principalOf(request);
    const { accountId, userId } = principal;
    const target = await findUser(accountId, request.params.id);
    const targetId = String(target._id);
    if (userId === targetId) throw new ConflictError('You cannot delete your own user');
    await withinCaller(request, 'user.delete', targetId, () => requireUserWithin(principal, target.role as Role, 'delete'));
    const remove = async () => {
      const { deletedCount } = await app.db.users.deleteOne({ _id: target._id, account_id: accountId });
      if (deletedCount === 0) throw new NotFoundError(`User ${request.params.id} not found`);
    };
    if (target.role === 'owner') await ownerOnly(request, 'user.delete', targetId, 'delete an owner');
    // Recorded write-ahead (plugins/app/audit.ts `change`).
    await app.audit.change(request, async (announce) => {
      await announce({ action: 'user.delete', outcome: 'success', resource: { type: 'user', id: targetId }, details: { email: target.email, role: target.role } });
      if (target.role === 'owner') {
        await withoutLosingLastOwner(app.db, accountId, remove, async () => {
          await app.db.users.create(target);
        });
      } else {
        await remove();
      }
    });
    await app.db.settings.deleteMany({ account_id: accountId, user_id: target._id });
    return { data: { id: targetId, deleted: true as const } };
  });
};

export default users;
