import { Types } from 'mongoose';
import type { CreateParameterRequest, ListParametersQuery, Page, Parameter, UpdateParameterRequest } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { ParameterDoc } from '../../../models/parameter.model.js';
import type { Sealed, Vault } from '../../../lib/vault.js';
import { boundTo } from '../../../lib/sealed-fields.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import {
  Literal, PARAMETER_NAME, TemplateError, parseTemplate, renderTemplate, templateUses, type TemplateContext,
} from '../../../lib/templates.js';
import { BadRequestError, ConflictError, NotFoundError } from '../../../errors.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

type StoredParameter = ParameterDoc & { _id: Types.ObjectId };
type AccountId = string | Types.ObjectId;

/** The one read shape of a parameter: a secret one's value never appears. */
export function presentParameter(doc: StoredParameter): Parameter {
  return {
    id: String(doc._id),
    name: doc.name,
    value: doc.secret ? null : doc.value ?? '',
    secret: doc.secret,
    has_value: doc.secret ? doc.secret_value != null : doc.value != null,
    description: doc.description ?? null,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

/** The TemplateError of a path naming a secret parameter (completes "<field> …"). */
export function secretParameterError(name: string): TemplateError {
  return new TemplateError(`names the secret parameter "${name}"; secret parameters cannot be used in paths`);
}

const parameterNotFound = (id: string) => new NotFoundError(`Parameter ${id} not found`);
const duplicateName = (name: string) => new ConflictError(`name: a parameter named '${name}' already exists`);

function checkName(name: string): void {
  if (!PARAMETER_NAME.test(name)) {
    throw new BadRequestError('name must start with a letter or _ and hold only letters, digits and _ (at most 64 characters)');
  }
}

/** What may appear in a template besides parameters and dates (`{{run.id}}`, `{{file.*}}`). */
export interface TemplateAllowance {
  /** `{{file.name}}` / `{{file.path}}`: a watcher's paths only. */
  file?: boolean;
  /** `{{run.id}}`: where there is a run (a transfer, a schedule's run). */
  run?: boolean;
}

/** What an audit record of a change names: never the value. */
export interface ParameterSubject {
  id: string;
  name: string;
  secret: boolean;
  changed?: string[];
}
/** Called after the checks, right before the write (plugins/app/access/audit.service.ts `change`). */
export type BeforeWrite = (subject: ParameterSubject) => Promise<void>;
const noAnnouncement: BeforeWrite = async () => {};

/**
 * The account's global parameters (`app.parameters`; docs/automation.md "Global parameters and
 * templates"). Every query is scoped to the account: unknown, malformed and other accounts' ids
 * are the same 404. A secret value is sealed bound to its record and is opened by nothing here:
 * secret parameters cannot be used in paths (paths show in responses, logs and the audit trail).
 */
export class ParametersService {
  constructor(private readonly o: { db: Models; vault: Vault }) {}

  /** A page of the account's parameters, newest first; `name` narrows it to that one (exact, on the unique index). */
  list(accountId: AccountId, query: ListParametersQuery): Promise<Page<Parameter>> {
    const { name, ...page } = query;
    const filter = { account_id: accountId, ...(name !== undefined ? { name } : {}) };
    return paginate(this.o.db.parameters, filter, page, (doc) => presentParameter(doc as StoredParameter));
  }

  /** The caller's parameter, or 404. */
  async get(accountId: AccountId, id: string): Promise<Parameter> {
    return presentParameter(await this.findOwned(accountId, id));
  }

  /** Creates a parameter; a secret value is sealed bound to the new record. 409 on a taken name. */
  async create(accountId: AccountId, input: CreateParameterRequest, beforeWrite: BeforeWrite = noAnnouncement): Promise<Parameter> {
    const { db } = this.o;
    checkName(input.name);
    if (await db.parameters.exists({ account_id: accountId, name: input.name })) throw duplicateName(input.name);
    const secret = input.secret ?? false;
    // The id is chosen here so that a secret value is sealed bound to it.
    const owner = { _id: new Types.ObjectId(), account_id: accountId };
    await beforeWrite({ id: String(owner._id), name: input.name, secret });
    try {
      const doc = await db.parameters.create({
        ...owner,
        name: input.name,
        secret,
        ...this.valueFields(owner, secret, input.value),
        description: input.description ?? null,
      });
      return presentParameter(doc.toObject() as StoredParameter);
    } catch (err) {
      if (isDuplicateKey(err)) throw duplicateName(input.name);
      throw err;
    }
  }

  /**
   * Changes the given fields. A plain parameter made secret has its value sealed; a secret one
   * made plain needs a new `value` (the sealed one is never unsealed into a readable field).
   */
  async update(
    accountId: AccountId, id: string, input: UpdateParameterRequest, beforeWrite: BeforeWrite = noAnnouncement,
  ): Promise<Parameter> {
    const { db } = this.o;
    const changed = Object.keys(input).sort();
    if (changed.length === 0) throw new BadRequestError('body must contain at least one of name, value, secret, description');
    const doc = await this.findOwned(accountId, id);
    if (input.name !== undefined) {
      checkName(input.name);
      if (input.name !== doc.name && await db.parameters.exists({ account_id: accountId, name: input.name })) throw duplicateName(input.name);
    }
    const secret = input.secret ?? doc.secret;
    if (doc.secret && !secret && input.value === undefined) {
      throw new BadRequestError('value is required when secret changes to false (a secret value is never made readable)');
    }
    const set: Record<string, unknown> = { updated_at: new Date() };
    if (input.name !== undefined) set.name = input.name;
    if (input.description !== undefined) set.description = input.description;
    if (input.value !== undefined || secret !== doc.secret) {
      set.secret = secret;
      // Plain → secret without a new value: the stored plain value is sealed.
      Object.assign(set, this.valueFields(doc, secret, input.value ?? doc.value ?? ''));
    }
    const name = input.name ?? doc.name;
    await beforeWrite({ id: String(doc._id), name, secret, changed });
    let updated;
    try {
      updated = await db.parameters.findOneAndUpdate({ _id: doc._id, account_id: doc.account_id }, { $set: set }, { new: true }).lean();
    } catch (err) {
      if (isDuplicateKey(err)) throw duplicateName(name);
      throw err;
    }
    if (!updated) throw parameterNotFound(id);
    return presentParameter(updated as StoredParameter);
  }

  /** Deletes permanently; returns what the audit record names. Templates naming it fail their next run. */
  async remove(accountId: AccountId, id: string, beforeWrite: BeforeWrite = noAnnouncement): Promise<Parameter> {
    const { db } = this.o;
    const doc = await this.findOwned(accountId, id);
    await beforeWrite({ id: String(doc._id), name: doc.name, secret: doc.secret });
    if ((await db.parameters.deleteOne({ _id: doc._id, account_id: doc.account_id })).deletedCount !== 1) throw parameterNotFound(id);
    return presentParameter(doc);
  }

  /**
   * The plain values of the named parameters that exist (one query on the unique {account_id,
   * name} index). A name that does not exist is simply absent (the render names it); a secret
   * one throws a TemplateError saying so, since secret values never go into paths.
   */
  async values(accountId: AccountId, names: string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (names.length === 0) return out;
    const docs = await this.o.db.parameters
      .find({ account_id: accountId, name: { $in: [...new Set(names)] } }, { name: 1, secret: 1, value: 1 }).lean();
    for (const doc of docs) {
      if (doc.secret) throw secretParameterError(doc.name);
      out.set(doc.name, doc.value ?? '');
    }
    return out;
  }

  /**
   * Checks a template as it is stored: syntax, variables `allowed` here, and that every
   * parameter it names exists and is not secret. Throws a 400 naming `field`.
   */
  async checkTemplate(accountId: AccountId, field: string, text: string, allowed: TemplateAllowance): Promise<void> {
    await this.resolve(accountId, field, text, allowed);
  }

  /**
   * Checks and renders a template in one step (a transfer created now): the 400s of
   * `checkTemplate`, then the rendered text, the parameters' values read once. `overrides` (a
   * workflow run's own parameters) take the place of the account's parameters of those names.
   * A Literal (a value, not something the account's user wrote) is returned as it is, never parsed
   * (docs/security.md "Templates: data is never code").
   */
  async renderNow(
    accountId: AccountId, field: string, text: string | Literal, allowed: TemplateAllowance, ctx: Omit<TemplateContext, 'params'>,
    overrides?: ReadonlyMap<string, string>,
  ): Promise<string> {
    if (text instanceof Literal) return text.text;
    const { parts, params } = await this.resolve(accountId, field, text, allowed, overrides);
    try {
      return renderTemplate(parts, { ...ctx, params });
    } catch (err) {
      if (err instanceof TemplateError) throw new BadRequestError(`${field} ${err.message}`);
      throw err;
    }
  }

  private async resolve(accountId: AccountId, field: string, text: string, allowed: TemplateAllowance, overrides?: ReadonlyMap<string, string>) {
    try {
      const parts = parseTemplate(text);
      const uses = templateUses(parts);
      if (uses.file && !allowed.file) throw new TemplateError("uses {{file.name}} or {{file.path}}, which only a watcher's paths may hold");
      if (uses.run && !allowed.run) throw new TemplateError('uses {{run.id}}, which has no run here');
      const params = await this.values(accountId, uses.params.filter((name) => !overrides?.has(name)));
      for (const name of uses.params) if (overrides?.has(name)) params.set(name, overrides.get(name)!);
      const missing = uses.params.find((name) => !params.has(name));
      if (missing !== undefined) throw new TemplateError(`names the parameter "${missing}", which does not exist`);
      return { parts, params };
    } catch (err) {
      if (err instanceof TemplateError) throw new BadRequestError(`${field} ${err.message}`);
      throw err;
    }
  }

  private valueFields(owner: { _id: Types.ObjectId; account_id: unknown }, secret: boolean, value: string) {
    return secret
      ? { value: null, secret_value: this.o.vault.seal(value, boundTo('parameter.value', owner)) as Sealed }
      : { value, secret_value: null };
  }

  private async findOwned(accountId: AccountId, id: string): Promise<StoredParameter> {
    const _id = toObjectId(id);
    const doc = _id && await this.o.db.parameters.findOne({ _id, account_id: accountId }).lean();
    if (!doc) throw parameterNotFound(id);
    return doc as StoredParameter;
  }
}
