// e2e `chaos-sample`: a seeded sample of the chaos matrix (`npm run chaos` runs all of it), small
// enough for `npm test` (about 2 minutes): one cell where the operator is killed right after a step
// of an operation (the step and the operation drawn from the seed, the step's activity id from the
// operation's recorded history), and one where a voter's pod is killed while the operation waits at
// a gate, or the leader dies in the middle of a promotion. Only faults that stay in the cell's
// namespace: the other scenarios share the test bed.
// The seed is printed; `npm run chaos -- --sample --seed N` runs the same cells again.
import { expect, it } from 'vitest';
import { LOCAL_FAULTS, OPERATIONS, recordedSteps, runCell, type Fault, type OperationName } from '../chaos/cell.ts';
import { rng, table } from '../chaos/results.ts';

// A fixed seed by default, so that npm test is the same test every time (QUEEN_CHAOS_SEED=N draws
// other cells; QUEEN_CHAOS_SEED=random a new seed each run).
const seedVar = process.env.QUEEN_CHAOS_SEED ?? '480875';
const seed = seedVar === 'random' ? Math.floor(Math.random() * 1_000_000) : Number(seedVar);
const random = rng(seed);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;

const cells: { op: OperationName; fault: Fault }[] = [];
const crashed = pick(OPERATIONS);
cells.push({ op: crashed, fault: { kind: 'crash', activityId: pick(recordedSteps(crashed)).id } });
const local = pick(LOCAL_FAULTS);
cells.push({ op: local === 'leader-mid-promote' ? 'ScaleUp' : pick(['RollingUpgrade', 'ScaleUp'] as const), fault: { kind: local } });

it(`chaos-sample (seed ${seed}): ${cells.map((c) => `${c.op} × ${c.fault.kind === 'crash' ? `crash@${c.fault.activityId}` : c.fault.kind}`).join(', ')}`, async () => {
  console.log(`chaos sample seed ${seed}: rerun with npm run chaos -- --sample --seed ${seed}`);
  const results = [];
  for (const c of cells) {
    results.push(await runCell(c.op, c.fault));
  }
  console.log(table(results));
  expect(
    results.filter((r) => r.violations.length).map((r) => `${r.operation} × ${r.step ?? r.fault}: ${r.violations.join('; ')}`),
    `seed ${seed}: npm run chaos -- --sample --seed ${seed}`,
  ).toEqual([]);
});
