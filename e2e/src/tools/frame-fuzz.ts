import fc from 'fast-check';
import { parseMessage, PROTOCOL_VERSION } from '@xfer/shared';

/**
 * fast-check arbitraries of agent-protocol frames, for property tests that throw them at either
 * end (the control plane's agent endpoint, the agent): JSON that is no frame, frame-shaped
 * objects whose `type` is a real message name or an `Object.prototype` name, mutated valid
 * payloads of every message type, binary frames, text frames that are not UTF-8, and valid
 * frames in any order. Deliberately not built on the schemas' own validation, so a hole in it
 * is found rather than mirrored.
 */

/** One frame as sent on the socket. */
export interface FuzzFrame {
  /** What the generator meant to produce (shown when a property fails). */
  kind: 'json' | 'text' | 'shape' | 'mutated' | 'valid' | 'binary' | 'not-utf8';
  data: string | Buffer;
  binary: boolean;
}

/** Names an object inherits from Object.prototype: a lookup `schemas[type]` finds these. */
export const PROTOTYPE_NAMES = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf', 'toLocaleString'] as const;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** Valid payloads per message type (plain JSON data). */
export type Samples = Record<string, readonly unknown[]>;

/** Values that break careless code: wrong types, extremes, long and odd strings, nesting. */
const oddValue: fc.Arbitrary<Json> = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>,
  fc.constantFrom<Json>(null, true, false, 0, -1, 1.5, -0.5, 1e308, -1e308, 2 ** 53 + 2, '', '0', 'x'.repeat(5000), [], {}, [[[[]]]]),
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.constantFrom(...PROTOTYPE_NAMES),
);

/**
 * Every path to an object or array inside `value` (the root is `[]`). Steps stay the property
 * names `Object.entries` gives: a mutation can leave a non-index key on an array (`"abc"`), which
 * `Number(key)` would turn into `NaN` and a path that leads nowhere.
 */
function containers(value: Json, path: string[] = []): string[][] {
  if (value === null || typeof value !== 'object') return [];
  const out = [path];
  for (const [key, child] of Object.entries(value)) out.push(...containers(child, [...path, key]));
  return out;
}

/** Sets an own property, also for `__proto__` (plain assignment would change the prototype). */
function setOwn(target: Json, key: string | number, value: Json): void {
  const name = String(key);
  if (Array.isArray(target) && name !== '__proto__') {
    // An array's `length` takes only a valid length. An index past the end appends: index
    // "999999999" would make a frame of a billion nulls (and no string holds that).
    if (name === 'length') return;
    const index = Number(name);
    if (Number.isInteger(index) && index >= 0 && String(index) === name) target[Math.min(index, target.length)] = value;
    else (target as unknown as Record<string, Json>)[name] = value;
  } else Object.defineProperty(target, name, { value, enumerable: true, writable: true, configurable: true });
}

export interface Mutation {
  where: number;
  op: 'set' | 'delete' | 'replace';
  key: string;
  value: Json;
}

const mutation: fc.Arbitrary<Mutation> = fc.record({
  where: fc.nat(),
  op: fc.constantFrom('set', 'set', 'delete', 'replace'),
  key: fc.oneof(fc.constantFrom('job_id', 'request_id', 'files', 'path', 'type', 'credentials', 'running_jobs', 'connection', 'source', 'options'), fc.constantFrom(...PROTOTYPE_NAMES), fc.string({ maxLength: 12 })),
  value: oddValue,
});

/** `payload` with the mutations applied (on a copy), each at one of its objects or arrays. */
export function mutate(payload: Json, mutations: Mutation[]): Json {
  const copy = (value: Json) => JSON.parse(JSON.stringify(value)) as Json;
  let root = copy(payload);
  for (const raw of mutations) {
    // A copy of the value too: constants such as `{}` are one shared object, and setting it
    // into itself by a later mutation would make a cycle (and change the constant for later runs).
    const m = { ...raw, value: copy(raw.value) };
    const paths = containers(root);
    if (paths.length === 0 || m.op === 'replace' && m.where % 5 === 0) {
      root = m.value;
      continue;
    }
    const path = paths[m.where % paths.length]!;
    let target: Json = root;
    for (const step of path) target = (target as Record<string, Json>)[step]!;
    const keys = Object.keys(target as object);
    // Mostly a key the payload has (a wrong value where a right one was expected), else any key.
    const key = keys.length > 0 && m.where % 3 !== 0 ? keys[m.where % keys.length]! : m.key;
    if (m.op === 'delete') {
      // Not splice: an earlier mutation may have set an own `constructor` on this array, and
      // splice builds its result through `constructor[Symbol.species]`.
      if (Array.isArray(target) && /^\d+$/.test(key) && Number(key) < target.length) {
        for (let i = Number(key); i < target.length - 1; i++) target[i] = target[i + 1]!;
        target.length -= 1;
      } else if (!(Array.isArray(target) && key === 'length')) {
        // (An array's `length` cannot be deleted: fast-check's strings include "length".)
        delete (target as Record<string, Json>)[key];
      }
    } else {
      setOwn(target, key, m.value);
    }
  }
  return root;
}

/** A frame `{v, type, id, payload}` as JSON text, keeping own `__proto__` keys. */
function envelope(type: Json, payload: Json, v: Json = PROTOCOL_VERSION, id: Json = 'f'): string {
  const frame = {} as Record<string, Json>;
  for (const [key, value] of [['v', v], ['type', type], ['id', id], ['payload', payload]] as const) setOwn(frame, key, value);
  return JSON.stringify(frame);
}

/** Bytes that are not UTF-8: random text with a byte no UTF-8 sequence allows, or a cut sequence. */
const notUtf8: fc.Arbitrary<Buffer> = fc.tuple(
  fc.string({ maxLength: 40 }),
  fc.constantFrom([0xff], [0xfe], [0xc3], [0xe2, 0x82], [0x80], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xc0, 0xaf]),
  fc.boolean(),
).map(([text, bad, framed]) => {
  const inner = Buffer.concat([Buffer.from(text), Buffer.from(bad)]);
  // Half of them inside an otherwise valid-looking frame.
  return framed ? Buffer.concat([Buffer.from('{"v":1,"type":"pong","id":"1","payload":{"request_id":"'), inner, Buffer.from('"}}')]) : inner;
});

/**
 * Frames for one direction. `samples` gives, per message type of that direction, valid payloads
 * (the generator mutates them, and sends some unchanged: a valid frame out of session order).
 */
export function fuzzFrame(samples: Samples): fc.Arbitrary<FuzzFrame> {
  const types = Object.keys(samples);
  const sample = sampleOf(samples);
  return fc.oneof(
    fc.json({ maxDepth: 3 }).map(text('json')),
    fc.string({ unit: 'grapheme', maxLength: 60 }).map(text('text')),
    fc.record({
      v: fc.oneof({ weight: 4, arbitrary: fc.constant<Json>(PROTOCOL_VERSION) }, { weight: 1, arbitrary: oddValue }),
      type: fc.oneof(fc.constantFrom(...types), fc.constantFrom(...PROTOTYPE_NAMES), oddValue),
      id: fc.oneof(fc.constant<Json>('x'), oddValue),
      payload: oddValue,
    }).map(({ v, type, id, payload }) => text('shape')(envelope(type, payload, v, id))),
    { weight: 3, arbitrary: fc.tuple(sample, fc.array(mutation, { minLength: 1, maxLength: 3 })).map(([[type, payload], ms]) => text('mutated')(envelope(type, mutate(payload, ms)))) },
    { weight: 2, arbitrary: validFrame(samples) },
    fc.uint8Array({ maxLength: 64 }).map((bytes): FuzzFrame => ({ kind: 'binary', data: Buffer.from(bytes), binary: true })),
    notUtf8.map((data): FuzzFrame => ({ kind: 'not-utf8', data, binary: false })),
  );
}

/** A valid frame of one of the sample payloads, unchanged. */
export function validFrame(samples: Samples, types = Object.keys(samples)): fc.Arbitrary<FuzzFrame> {
  return sampleOf(samples, types).map(([type, payload]) => text('valid')(envelope(type, payload)));
}

function sampleOf(samples: Samples, types = Object.keys(samples)): fc.Arbitrary<[string, Json]> {
  return fc.constantFrom(...types).chain((type) => fc.tuple(fc.constant(type), fc.constantFrom(...(samples[type] as Json[]))));
}

const text = (kind: FuzzFrame['kind']) => (data: string): FuzzFrame => ({ kind, data, binary: false });

/** Whether `frame` is a valid message of the direction `schemas` (binary and non-UTF-8 frames never are). */
export function isValidFrame(schemas: Parameters<typeof parseMessage>[0], frame: FuzzFrame): boolean {
  if (frame.binary) return false;
  if (typeof frame.data !== 'string' && !Buffer.from(frame.data.toString('utf8')).equals(frame.data)) return false;
  try {
    parseMessage(schemas, frame.data);
    return true;
  } catch {
    return false;
  }
}

/** The message type of a frame that is valid (see isValidFrame). */
export function typeOf(frame: FuzzFrame): string {
  return (JSON.parse(frame.data.toString()) as { type: string }).type;
}

/** How a frame is shown in a failing property's counterexample: kind and the first bytes. */
export function describeFrame(frame: FuzzFrame): string {
  const text = typeof frame.data === 'string' ? frame.data : frame.data.toString('hex');
  return `${frame.kind}${frame.binary ? ' (binary)' : ''}: ${text.length > 200 ? `${text.slice(0, 200)}…` : text}`;
}
