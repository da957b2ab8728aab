import { createHash, timingSafeEqual } from 'node:crypto';
import { Types } from 'mongoose';
import {
  CONNECTION_TYPE_SPECS, connectionProblem, credentialBindingChange, normalizeBasePath, optionsWithDefaults,
  type ConnectionFields, type ConnectionSettings, type ConnectionType,
  type CreateConnectionRequest, type ListConnectionsQuery, type Page, type UpdateConnectionRequest,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { ConnectionDoc } from '../../../models/connection.model.js';
import type { Sealed, Vault } from '../../../lib/vault.js';
import { boundTo } from '../../../lib/sealed-fields.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { BadRequestError, ConflictError, ForbiddenError, NotFoundError } from '../../../errors.js';
import { serves, SERVES } from '../agents/eligibility.js';
import { runConnection } from '../transfers/transfers.service.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

/** A connection as stored: its credentials sealed (never put it in a response: routes/connections presents it). */
export type StoredConnection = ConnectionDoc & { _id: Types.ObjectId };
type Credentials = Record<string, string | number>;
type AccountId = string | Types.ObjectId;

export function connectionNotFound(id: string): NotFoundError {
  return new NotFoundError(`Connection ${id} not found`);
}

/** The caller's connection, or 404 for unknown, malformed and other accounts' ids alike. */
async function findOwned(db: Models, accountId: AccountId, id: string): Promise<StoredConnection> {
  const _id = toObjectId(id);
  const doc = _id && await db.connections.findOne({ _id, account_id: accountId }).lean();
  if (!doc) throw connectionNotFound(id);
  return doc as StoredConnection;
}

function check(fields: ConnectionFields): void {
  const problem = connectionProblem(fields);
  if (problem) throw new BadRequestError(problem);
}

type Owned = { _id: Types.ObjectId; account_id: unknown };

/** nfs may have nothing to store: an empty object is no credentials. Bound to the connection `doc`. */
function sealCredentials(vault: Vault, doc: Owned, credentials: Record<string, unknown> | null | undefined): Sealed | null {
  return credentials && Object.keys(credentials).length > 0 ? vault.seal(credentials, boundTo('connection.credentials', doc)) : null;
}

function openCredentials(vault: Vault, doc: StoredConnection): Credentials {
  return doc.credentials ? vault.open<Credentials>(doc.credentials as Sealed, boundTo('connection.credentials', doc)) : {};
}

/**
 * Stored credentials stay where they were given: a change of host, port, an option that decides
 * where or how safely they travel, or the agent that carries them, needs them again. Otherwise
 * whoever may edit the connection could send them to a host or agent of their choosing.
 */
function assertCredentialsStayBound(doc: StoredConnection, input: UpdateConnectionRequest): void {
  if (doc.credentials == null || input.credentials !== undefined) return;
  const before = {
    type: doc.type as ConnectionType, host: doc.host ?? null, port: doc.port ?? null,
    options: (doc.options as Record<string, unknown> | undefined) ?? {}, agent_id: doc.agent_id ? String(doc.agent_id) : null,
    agent_pool: doc.agent_pool ?? null,
  };
  const field = credentialBindingChange(before, {
    type: input.type ?? before.type,
    host: input.host !== undefined ? input.host : before.host,
    port: input.port !== undefined ? input.port : before.port,
    options: input.options ?? before.options,
    agent_id: input.agent_id !== undefined ? input.agent_id : before.agent_id,
    agent_pool: input.agent_pool !== undefined ? input.agent_pool : before.agent_pool,
  });
  if (field) {
    throw new BadRequestError(`${field} cannot change without credentials: stored credentials stay bound to the host, port, security options and agent they were given for; send credentials again with the change`);
  }
}

/**
 * Whether agent `agentId` of the account serves the connection `doc` (eligibility.ts `serves`: the
 * one rule, approval included): credentials are opened for an agent, or taken from one, only then.
 */
async function servedBy(db: Models, accountId: AccountId, agentId: string, doc: StoredConnection): Promise<boolean> {
  const _id = toObjectId(agentId);
  const agent = _id && await db.agents.findOne({ _id, account_id: accountId }, SERVES).lean();
  return !!agent && serves(agent, runConnection(doc));
}

/** `agent_id` must name an agent of the account (unknown and other accounts' agents alike). */
async function assertAgentOfAccount(db: Models, accountId: AccountId, agentId: string | null | undefined): Promise<void> {
  if (!agentId) return;
  if (!(await db.agents.exists({ _id: new Types.ObjectId(agentId), account_id: accountId }))) {
    throw new BadRequestError(`body.agent_id ${agentId} is not an agent of this account`);
  }
}

/**
 * A connection is served by one agent (`agent_id`) or by the agents of one pool (`agent_pool`),
 * never both: 400 naming the field that would make both set.
 */
function assertOneServer(agentId: unknown, agentPool: unknown, field: 'agent_id' | 'agent_pool'): void {
  if (agentId && agentPool) {
    const other = field === 'agent_pool' ? 'agent_id' : 'agent_pool';
    throw new BadRequestError(`body.${field} cannot be set together with ${other}: a connection is served by one agent or by one pool (send ${other}: null to change)`);
  }
}

const duplicateName = (name: string) => new ConflictError(`A connection named '${name}' already exists`);

/** The pre-check gives the clear message; the unique index {account_id, name} settles races. */
async function assertNameFree(db: Models, accountId: AccountId, name: string): Promise<void> {
  if (await db.connections.exists({ account_id: accountId, name })) throw duplicateName(name);
}

/** What the audit record of a change names; called after the checks, right before the write (plugins/app/access/audit.service.ts `change`). */
export type BeforeWrite = (subject: { id: string; name: string; type: string; changed?: string[] }) => Promise<void>;
const noAnnouncement: BeforeWrite = async () => {};

/**
 * Credential fields an agent may replace on its own, per type: the ones a service rotates while
 * they are used (OAuth refresh tokens). Nothing else an agent says changes a connection.
 */
export const ROTATING_CREDENTIALS: Partial<Record<ConnectionType, readonly string[]>> = { onedrive: ['refresh_token'] };

/** `stored`; `unchanged` (already the stored value); `superseded` (the stored value is not the one replaced: someone stored another meanwhile, which wins). */
export type RotationOutcome = 'stored' | 'unchanged' | 'superseded';

const sha256Hex = (value: string) => createHash('sha256').update(value).digest();

/** What ConnectionsService needs. */
export interface ConnectionsServiceOptions {
  db: Models;
  /** Seals credentials on write, opens them for checks and for the agents that use them. */
  vault: Vault;
}

/**
 * The account's connections (decisions.md "Connections"): checked, stored with credentials sealed
 * bound to the record, and opened again only for the agent that serves one (`settingsFor`) or to
 * check a change. Throws the error classes of errors.ts (404 for other accounts' ids).
 */
export class ConnectionsService {
  constructor(private readonly o: ConnectionsServiceOptions) {}

  /** Creates a connection, its credentials sealed bound to it. */
  async create(accountId: AccountId, input: CreateConnectionRequest, beforeWrite: BeforeWrite = noAnnouncement): Promise<StoredConnection> {
    const { db, vault } = this.o;
    const name = input.name.trim();
    const fields: ConnectionFields = {
      type: input.type,
      host: input.host ?? null,
      port: input.port ?? null,
      path: input.path ?? '/',
      credentials: input.credentials ?? null,
      options: input.options ?? {},
    };
    check(fields);
    assertOneServer(input.agent_id, input.agent_pool, 'agent_pool');
    await assertAgentOfAccount(db, accountId, input.agent_id);
    await assertNameFree(db, accountId, name);
    // The id is chosen here so that the credentials are sealed bound to it.
    const owner = { _id: new Types.ObjectId(), account_id: accountId };
    await beforeWrite({ id: String(owner._id), name, type: fields.type });
    try {
      const doc = await db.connections.create({
        ...owner,
        name,
        type: fields.type,
        host: fields.host,
        port: fields.port,
        path: normalizeBasePath(fields.path),
        options: fields.options,
        credentials: sealCredentials(vault, owner, input.credentials),
        agent_id: input.agent_id ? new Types.ObjectId(input.agent_id) : null,
        agent_pool: input.agent_pool ?? null,
      });
      return doc.toObject() as StoredConnection;
    } catch (err) {
      if (isDuplicateKey(err)) throw duplicateName(name);
      throw err;
    }
  }

  /**
   * Changes only the given fields, after checking the connection they make together. Given
   * `credentials` and `options` replace the stored ones entirely; a new `type` needs new
   * credentials (the stored ones were checked against the old type). Returns the names of the
   * fields given, for the audit record.
   */
  async update(
      accountId: AccountId, id: string, input: UpdateConnectionRequest, beforeWrite: BeforeWrite = noAnnouncement,
    ): Promise<{ connection: StoredConnection; changed: string[] }> {
    const { db, vault } = this.o;
    const doc = await findOwned(db, accountId, id);
    const type = input.type ?? (doc.type as ConnectionType);
    if (type !== doc.type && input.credentials === undefined) {
      throw new BadRequestError(`credentials are required when type changes (the stored ones are for ${doc.type})`);
    }
    check({
      type,
      host: input.host !== undefined ? input.host : doc.host ?? null,
      port: input.port !== undefined ? input.port : doc.port ?? null,
      path: input.path ?? doc.path,
      credentials: input.credentials ?? openCredentials(vault, doc),
      options: input.options ?? (doc.options as Record<string, unknown> | undefined) ?? {},
    });
    assertCredentialsStayBound(doc, input);
    assertOneServer(
      input.agent_id !== undefined ? input.agent_id : doc.agent_id, input.agent_pool !== undefined ? input.agent_pool : doc.agent_pool,
      input.agent_pool ? 'agent_pool' : 'agent_id',
    );

    await assertAgentOfAccount(db, accountId, input.agent_id);
    const set: Record<string, unknown> = { updated_at: new Date() };
    const name = input.name?.trim();
    if (name !== undefined) {
      if (name !== doc.name) await assertNameFree(db, accountId, name);
      set.name = name;
    }
    if (input.type !== undefined) set.type = input.type;
    if (input.host !== undefined) set.host = input.host;
    if (input.port !== undefined) set.port = input.port;
    if (input.path !== undefined) set.path = normalizeBasePath(input.path);
    if (input.options !== undefined) set.options = input.options;
    if (input.credentials !== undefined) set.credentials = sealCredentials(vault, doc, input.credentials);
    if (input.agent_id !== undefined) set.agent_id = input.agent_id ? new Types.ObjectId(input.agent_id) : null;
    if (input.agent_pool !== undefined) set.agent_pool = input.agent_pool;

    const changed = Object.keys(input).sort();
    await beforeWrite({ id: String(doc._id), name: name ?? doc.name, type, changed });
    let updated;
    try {
      // Conditional on the revision that was checked, so two concurrent updates cannot combine
      // into a connection neither validated (say, a new type with the old type's credentials).
      updated = await db.connections.findOneAndUpdate(
        { _id: doc._id, account_id: doc.account_id, revision: doc.revision },
        { $set: set, $inc: { revision: 1 } },
        { new: true },
      ).lean();
    } catch (err) {
      if (isDuplicateKey(err) && name !== undefined) throw duplicateName(name);
      throw err;
    }
    if (!updated) {
      if (!(await db.connections.exists({ _id: doc._id, account_id: doc.account_id }))) throw connectionNotFound(id);
      throw new ConflictError(`Connection ${id} was changed by another request at the same time; retry`);
    }
    return { connection: updated as StoredConnection, changed };
  }

  /** Deletes permanently; returns what the audit record names. */
  async remove(accountId: AccountId, id: string, beforeWrite: BeforeWrite = noAnnouncement): Promise<StoredConnection> {
    const { db } = this.o;
    const doc = await findOwned(db, accountId, id);
    await beforeWrite({ id: String(doc._id), name: doc.name, type: doc.type });
    const deleted = await db.connections.deleteOne({ _id: doc._id, account_id: doc.account_id });
    if (deleted.deletedCount !== 1) throw connectionNotFound(id);
    return doc;
  }

  /** The caller's connection, or 404 for unknown, malformed and other accounts' ids alike. */
  get(accountId: AccountId, id: string): Promise<StoredConnection> {
    return findOwned(this.o.db, accountId, id);
  }

  /** The account's connections, newest first, one page; `type` narrows them. */
  list(accountId: AccountId, query: ListConnectionsQuery): Promise<Page<StoredConnection>> {
    const { type, ...page } = query;
    return paginate(this.o.db.connections, { account_id: accountId, ...(type ? { type } : {}) }, page, (doc) => doc as StoredConnection);
  }

  /**
   * Everything a connector needs, credentials decrypted, for agent `agentId`, which must serve the
   * connection (eligibility.ts `serves`, approval included; ForbiddenError otherwise): the one way
   * credentials leave for an agent (a job, a relay's source side, a watcher's set, a test, a
   * settle). Its callers chose the agent by the same rule: this is the last check before the
   * secret leaves. Never put the result in a response, log or audit record.
   */
  async settingsFor(accountId: AccountId, id: string, agentId: string): Promise<ConnectionSettings> {
    const doc = await findOwned(this.o.db, accountId, id);
    if (!(await servedBy(this.o.db, accountId, agentId, doc))) {
      throw new ForbiddenError(`Agent ${agentId} does not serve connection '${doc.name}': its credentials go only to an agent that does`);
    }
    return this.settingsOf(doc);
  }

  /**
   * Everything a connector needs, credentials decrypted, with no agent named: for checks of the
   * stored record. What goes to an agent goes through `settingsFor`. Throws NotFoundError for ids
   * that are not the account's.
   */
  async loadSettings(accountId: AccountId, id: string): Promise<ConnectionSettings> {
    return this.settingsOf(await findOwned(this.o.db, accountId, id));
  }

  private settingsOf(doc: StoredConnection): ConnectionSettings {
    const { vault } = this.o;
    const type = doc.type as ConnectionType;
    const spec = CONNECTION_TYPE_SPECS[type];
    const credentials = openCredentials(vault, doc);
    return {
      id: String(doc._id),
      name: doc.name,
      type,
      host: doc.host ?? spec.defaultHost(credentials),
      port: doc.port ?? spec.defaultPort,
      path: doc.path,
      options: optionsWithDefaults(type, (doc.options as Record<string, unknown> | undefined) ?? {}),
      agent_id: doc.agent_id ? String(doc.agent_id) : null,
      credentials,
    };
  }

  /**
   * Stores credentials the service rotated while agent `agentId` used connection `id`: merged into
   * the other credential fields and sealed again with the vault. Compare-and-swap twice over: each
   * field must still hold the value the rotation replaced (`previousSha256`, compared in constant
   * time), and the update is conditional on the revision read, so a concurrent edit of the
   * connection is never lost. Only connections of the agent's account that it serves
   * (eligibility.ts `serves`: NotFoundError otherwise), only the type's
   * rotating fields (BadRequestError).
   */
  async storeRotatedCredentials(
      accountId: AccountId, agentId: string, id: string,
      credentials: Readonly<Record<string, string>>, previousSha256: Readonly<Record<string, string>>,
      beforeWrite: () => Promise<void> = async () => {},
    ): Promise<RotationOutcome> {
    const { db, vault } = this.o;
    for (let attempt = 0; attempt < 3; attempt++) {
      const doc = await findOwned(db, accountId, id);
      if (!(await servedBy(db, accountId, agentId, doc))) throw connectionNotFound(id);
      const type = doc.type as ConnectionType;
      const allowed = ROTATING_CREDENTIALS[type] ?? [];
      const fields = Object.keys(credentials);
      const refused = fields.find((f) => !allowed.includes(f));
      if (fields.length === 0 || refused !== undefined) {
        throw new BadRequestError(`credentials.${refused ?? '?'} cannot be replaced by an agent for ${type} connections`);
      }
      const current = openCredentials(vault, doc);
      if (fields.every((f) => current[f] === credentials[f])) return 'unchanged';
      for (const f of fields) {
        const expected = previousSha256[f];
        if (expected === undefined) throw new BadRequestError(`previous_sha256.${f} is required`);
        if (!timingSafeEqual(sha256Hex(String(current[f] ?? '')), Buffer.from(expected, 'hex'))) return 'superseded';
      }
      const merged = { ...current, ...credentials };
      check({
        type, host: doc.host ?? null, port: doc.port ?? null, path: doc.path, credentials: merged,
        options: (doc.options as Record<string, unknown> | undefined) ?? {},
      });
      await beforeWrite();
      const updated = await db.connections.updateOne(
        { _id: doc._id, account_id: doc.account_id, revision: doc.revision },
        { $set: { credentials: sealCredentials(vault, doc, merged), updated_at: new Date() }, $inc: { revision: 1 } },
      );
      if (updated.modifiedCount === 1) return 'stored';
      // Changed since it was read (renamed, edited): read it again and decide on what is there now.
    }
    throw new ConflictError(`Connection ${id} kept changing while its rotated credentials were stored`);
  }
}
