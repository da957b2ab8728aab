import fp from 'fastify-plugin';
import { ParametersService } from './parameters.service.js';

export { ParametersService, presentParameter, secretParameterError } from './parameters.service.js';
export type { BeforeWrite, ParameterSubject, TemplateAllowance } from './parameters.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    parameters: ParametersService;
  }
}

/** The account's global parameters and the checks of path templates against them (`app.parameters`). */
export default fp(
  async (app) => {
    app.decorate('parameters', new ParametersService({ db: app.db, vault: app.vault }));
  },
  { name: 'parameters', dependencies: ['mongoose'] },
);
