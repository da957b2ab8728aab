import fc from 'fast-check';
import { fuzzFrame, mutate, PROTOTYPE_NAMES, type FuzzFrame } from './frame-fuzz.js';

/**
 * The frame generator itself must never throw: a throw inside it fails the property test that
 * uses it as if the server had failed (one CI run did: a mutation left the key "abc" on an array,
 * and the next mutation followed the path `NaN`). Thousands of frames, no server, well under a second.
 */
/** XFER_FUZZ_RUNS raises it for a long local hunt. */
const RUNS = Number(process.env.XFER_FUZZ_RUNS) || 20_000;

const samples = {
  hello: [{ version: '1', running_jobs: ['a', 'b'], connector_types: ['sftp'], nested: { list: [[1, 2], { x: [] }] } }],
  job_progress: [{ job_id: 'x', counters: { files_total: 1 }, files: [{ path: 'a', size: 1 }] }],
  pong: [{ request_id: '1' }],
};

/** Every frame is text or bytes; a mutated or valid one is still a JSON frame envelope. */
function wellFormed(frame: FuzzFrame): void {
  expect(typeof frame.data === 'string' || Buffer.isBuffer(frame.data)).toBe(true);
  if (frame.kind === 'mutated' || frame.kind === 'valid') {
    expect(Object.keys(JSON.parse(frame.data.toString()) as object)).toEqual(['v', 'type', 'id', 'payload']);
  }
}

test('generates 20,000 frames without throwing, each well formed', () => {
  fc.assert(fc.property(fuzzFrame(samples), wellFormed), { numRuns: RUNS });
});

test('mutations that leave non-index keys on arrays, then mutate again, still produce a frame', () => {
  // Payloads made of arrays only, so most mutations land on an array; the prototype names and
  // plain words among the generated keys become array properties.
  const arrays = { job_progress: [[[['a'], ['b', ['c']]], []]], hello: [[PROTOTYPE_NAMES.slice(), [[]]]] };
  fc.assert(fc.property(fuzzFrame(arrays as never), wellFormed), { numRuns: RUNS });
});

test("an array's length is never deleted or set (fast-check's strings include \"length\"): the array stays as it was", () => {
  for (const op of ['delete', 'set'] as const) expect(mutate([1, 2], [{ where: 0, op, key: 'length', value: 'x' }])).toEqual([1, 2]);
});
