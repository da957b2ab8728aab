// Jest runs the TypeScript tests as ESM through ts-jest; `npm test` builds first (tsc -b), so the
// global setup can use the built test-services library in e2e/dist.
/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/{shared,storage,control-plane,agent,cli,e2e}/{src,test}/**/*.test.ts'],
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/scripts/jest/tsconfig.json' }],
  },
  // Sources import './x.js' (NodeNext); in tests that must resolve to x.ts.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  testTimeout: 30_000,
  maxWorkers: 2,
  globalSetup: '<rootDir>/scripts/jest/global-setup.mjs',
  globalTeardown: '<rootDir>/scripts/jest/global-teardown.mjs',
  reporters: ['default', '<rootDir>/scripts/jest/summary-reporter.cjs'],
};
