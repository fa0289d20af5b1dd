// e2e `chaos-sample`: a seeded sample of the chaos matrix (`npm run chaos` runs all of it), small
// enough for `npm test` (about 3 minutes): one cell where the operator is killed right after a step
// of an operation (the operation drawn from the seed, and the step as a share of the steps a run of
// it without a fault takes here, as the matrix finds them: a recorded history may be of another
// path, a growth with restarts where the cell's grows online), and one where a voter's pod is
// killed while the operation waits at a gate, or the leader dies in the middle of a promotion. Only faults that stay in the cell's
// namespace: the other scenarios share the test bed.
// The seed is drawn from the commit the tests run on (test/chaos/seed.ts), so that every commit runs
// other cells and the matrix is covered over many; it is printed with the commands that run the
// same cells again. A draw that fails is a failure, to be run again with its seed and fixed.
import { expect, it } from 'vitest';
import { LOCAL_FAULTS, OPERATIONS, recordedSteps, runCell, type Fault, type OperationName } from '../chaos/cell.ts';
import { rng, table } from '../chaos/results.ts';
import { sampleSeed } from '../chaos/seed.ts';

const { seed, from } = sampleSeed();
const random = rng(seed);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;

const crashed = pick(OPERATIONS);
const share = random();
const local = pick(LOCAL_FAULTS);
const localCell: { op: OperationName; fault: Fault } = { op: local === 'leader-mid-promote' ? 'ScaleUp' : pick(['RollingUpgrade', 'ScaleUp'] as const), fault: { kind: local } };
const again = `npm run chaos -- --sample --seed ${seed}, or QUEEN_CHAOS_SEED=${seed} npm run e2e -- chaos-sample`;
const drawn = `${crashed} × crash after the step ${Math.round(share * 100)}% of the way through its steps, ${localCell.op} × ${local}`;

it(`chaos-sample (seed ${seed}): ${drawn}`, async () => {
  const results = [];
  // The steps the operation takes here, from a run without a fault (itself a cell of the matrix).
  const base = await runCell(crashed, { kind: 'none' });
  results.push(base);
  const ids = base.activities.length ? base.activities.map((a) => Number(a.split(':')[0])) : recordedSteps(crashed).map((x) => x.id);
  const cells: { op: OperationName; fault: Fault }[] = [{ op: crashed, fault: { kind: 'crash', activityId: ids[Math.floor(share * ids.length)]! } }, localCell];
  console.log(`chaos sample seed ${seed} (from ${from}): ${cells.map((c) => `${c.op} × ${c.fault.kind === 'crash' ? `crash@${c.fault.activityId}` : c.fault.kind}`).join(', ')}; the same cells again: ${again}`);
  for (const c of cells) {
    results.push(await runCell(c.op, c.fault));
  }
  console.log(table(results));
  expect(
    results.filter((r) => r.violations.length).map((r) => `${r.operation} × ${r.step ?? r.fault}: ${r.violations.join('; ')}`),
    `chaos sample seed ${seed} (from ${from}) failed: a broken promise, not flake; the same cells again: ${again}`,
  ).toEqual([]);
});
