// The import rules of the repository (docs/architecture.md "Import rules"), checked by
// e2e/test/import-rules.test.ts on every `npm test`; by hand:
//   npx depcruise --config .dependency-cruiser.cjs shared storage control-plane agent cli e2e
// Paths are relative to the repository root. A workspace package imported by name (`@xfer/shared`)
// resolves through node_modules to its real folder (`shared/dist/...`), so a rule on a package's
// folder catches both its name and a relative path into it.

/** The workspace packages but e2e, which may import every other one (it tests them together). */
const PACKAGES = '^(shared|storage|control-plane|agent|cli)/';
const CP = '^control-plane/src/';
/** A package's own tests: its test/ folder and its *.test.ts files. */
const TESTS = '(^[^/]+/test/|[.]test[.]tsx?$)';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'cp-routes-on-top',
      comment: 'routes -> plugins -> lib/models: plugins and lib never import routes (a service used by a route lives in plugins/app/<domain>/).',
      severity: 'error',
      from: { path: `${CP}(plugins|lib)/` },
      to: { path: `${CP}routes/` },
    },
    {
      name: 'cp-lib-below-plugins',
      comment: 'lib/ holds helpers without a Fastify instance: it never imports plugins/.',
      severity: 'error',
      from: { path: `${CP}lib/` },
      to: { path: `${CP}plugins/` },
    },
    {
      name: 'cp-models-at-the-bottom',
      comment: 'models/ imports nothing of plugins/ or routes/.',
      severity: 'error',
      from: { path: `${CP}models/` },
      to: { path: `${CP}(plugins|routes)/` },
    },
    {
      name: 'cp-no-cycles',
      comment: 'No circular imports inside the control plane.',
      severity: 'error',
      from: { path: CP },
      to: { path: CP, circular: true },
    },
    {
      name: 'shared-imports-no-package',
      comment: 'shared is the bottom of every package (schemas, protocol, client): it imports no other workspace package, not even in tests.',
      severity: 'error',
      from: { path: '^shared/' },
      to: { pathNot: '^(shared/|node_modules/)', dependencyTypesNot: ['core'] },
    },
    {
      name: 'storage-imports-only-shared',
      comment: 'storage (the plumbing the agent and the control plane share) depends on shared only.',
      severity: 'error',
      from: { path: '^storage/' },
      to: { pathNot: '^(storage/|shared/|node_modules/)', dependencyTypesNot: ['core'] },
    },
    {
      name: 'no-package-imports-e2e',
      comment: "e2e tests the packages together and holds the real test services: no package's code depends on it. "
        + "A package's own tests may start e2e's test services and use its test tools, as jest's global setup does "
        + "(not shared's: shared-imports-no-package).",
      severity: 'error',
      from: { path: PACKAGES, pathNot: TESTS },
      to: { path: '^e2e/' },
    },
    {
      name: 'agent-cli-not-on-control-plane',
      comment: 'The agent and the CLI talk to the control plane over the network (the protocol and the client in shared), never through its code.',
      severity: 'error',
      from: { path: '^(agent|cli)/' },
      to: { path: '^control-plane/' },
    },
  ],
  options: {
    // Type-only imports count: a type from routes/ in a plugin is the same backwards layer.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.base.json' },
    doNotFollow: { path: ['node_modules', '/dist/'] },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.tsx', '.js', '.mjs', '.cjs', '.json'],
    },
  },
};
