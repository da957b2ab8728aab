// The tree helpers live in e2e/src/tools/trees.ts (the benchmarks use them too).
export * from '../../src/tools/trees.js';
