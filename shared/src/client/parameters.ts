import type { Deleted, Page } from '../schemas/common.js';
import type { CreateParameterRequest, ListParametersQuery, Parameter, UpdateParameterRequest } from '../schemas/parameters.js';
import type { PageIterator } from './paging.js';
import { Resource, seg } from './resource.js';
import type { CallSettings } from './transport.js';

/** `/parameters`: the account's global parameters, inserted into paths by `{{params.NAME}}`. A secret one's `value` is always null. */
export class ParametersApi extends Resource {
  list(query?: ListParametersQuery, s?: CallSettings): Promise<Page<Parameter>> { return this.page('/parameters', query, s); }
  all(query?: ListParametersQuery, s?: CallSettings): PageIterator<Parameter> { return this.pager('/parameters', query, s); }
  get(id: string, s?: CallSettings): Promise<Parameter> { return this.data('GET', `/parameters/${seg(id)}`, s); }
  create(body: CreateParameterRequest, s?: CallSettings): Promise<Parameter> { return this.data('POST', '/parameters', { ...s, json: body }); }
  update(id: string, body: UpdateParameterRequest, s?: CallSettings): Promise<Parameter> {
    return this.data('PUT', `/parameters/${seg(id)}`, { ...s, json: body });
  }
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/parameters/${seg(id)}`, s); }
}
