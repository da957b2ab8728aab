import fc from 'fast-check';
import { digest, pathKey, VersionTable, type Slot } from './version-table.js';

/** The table against a Map holding the same operations: same contents after any sequence. */
type Op =
  | { kind: 'set'; path: number; id: number; reported: boolean }
  | { kind: 'touch'; path: number }
  | { kind: 'poll' };

interface ModelSlot extends Slot {
  epoch: number;
}

function check(table: VersionTable, model: Map<number, ModelSlot>, universe: number): void {
  expect(table.size).toBe(model.size);
  for (let p = 0; p < universe; p++) {
    const want = model.get(p);
    const got = table.get(pathKey(`p${p}`));
    if (!want) expect(got).toBeUndefined();
    else expect(got).toEqual({ idHi: want.idHi, idLo: want.idLo, since: want.since, reported: want.reported });
  }
  expect(table.waiting()).toBe([...model.values()].filter((s) => !s.reported).length);
}

test('behaves as a map of paths through inserts, updates, sweeps, growth and shrinking', () => {
  // A small path universe so sets hit existing paths and sweeps remove runs of neighbours.
  const universe = 300;
  const op: fc.Arbitrary<Op> = fc.oneof(
    { weight: 6, arbitrary: fc.record({ kind: fc.constant('set' as const), path: fc.nat(universe - 1), id: fc.nat(3), reported: fc.boolean() }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('touch' as const), path: fc.nat(universe - 1) }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'poll' as const }) },
  );
  fc.assert(
    fc.property(fc.array(op, { maxLength: 600 }), (ops) => {
      const table = new VersionTable();
      const model = new Map<number, ModelSlot>();
      let epoch = 1;
      let clock = 0;
      for (const o of ops) {
        const key = pathKey(o.kind === 'poll' ? '' : `p${o.path}`);
        if (o.kind === 'set') {
          const [idHi, idLo] = digest(`v${o.id}`);
          const slot = { idHi, idLo, since: ++clock, reported: o.reported };
          table.set(key, slot, epoch);
          model.set(o.path, { ...slot, epoch });
        } else if (o.kind === 'touch') {
          table.touch(key, epoch);
          const m = model.get(o.path);
          if (m) m.epoch = epoch;
        } else {
          const stale = [...model].filter(([, s]) => s.epoch !== epoch).map(([p]) => p);
          expect(table.sweep(epoch)).toBe(stale.length);
          for (const p of stale) model.delete(p);
          epoch++;
        }
      }
      check(table, model, universe);
    }),
    { numRuns: 100 },
  );
});

test('100,000 paths: a fixed number of bytes per path, given back when the folder empties', () => {
  const table = new VersionTable();
  const [idHi, idLo] = digest('size:1:mtime:0');
  for (let i = 0; i < 100_000; i++) {
    table.set(pathKey(`folder/file-${i}.csv`), { idHi, idLo, since: i, reported: true }, 1);
  }
  expect(table.size).toBe(100_000);
  // 2^18 slots of 40 bytes (the table is kept at most 3/4 full).
  expect(table.byteLength).toBe(262_144 * 40);
  expect(table.get(pathKey('folder/file-99999.csv'))).toMatchObject({ since: 99_999, reported: true });
  expect(table.sweep(2)).toBe(100_000);
  expect(table.size).toBe(0);
  expect(table.byteLength).toBe(64 * 40);
});
