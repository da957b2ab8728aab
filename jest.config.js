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
  // A worker keeps what every test file it ran left reachable (module registries of the vm
  // contexts Node does not free: jest's workerIdleMemoryLimit exists for this). Past this heap
  // after a file it is replaced: a CI run saw one worker reach a 1.3 GB heap by the time it ran
  // the agent's memory tests, whose collections then took so long that the 10,000-file copy timed
  // out and the watcher's retained-heap series jumped by 3 MiB.
  workerIdleMemoryLimit: '800MB',
  globalSetup: '<rootDir>/scripts/jest/global-setup.mjs',
  globalTeardown: '<rootDir>/scripts/jest/global-teardown.mjs',
  reporters: ['default', '<rootDir>/scripts/jest/summary-reporter.cjs'],
};
