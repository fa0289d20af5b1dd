// `npm run chaos` (test/chaos/run.ts): the whole matrix. For each operation, a run without a fault
// (its activities are the steps to crash at), then one run per step with the operator killed right
// after that step's side effects (QUEEN_CRASH_AT, worker.ts); then the faults of the world during an
// upgrade and a scale-up. Each cell runs in a namespace of its own; its result goes to the results
// file, from which the runner prints the table. QUEEN_CHAOS_CELLS selects cells (results.ts).
import { expect, it } from 'vitest';
import { BACKUP_OPERATIONS, DEFS, LINK_OPERATIONS, OPERATIONS, WORLD_FAULTS, recordedSteps, runCell, type CellResult, type OperationName, type WorldFault } from './cell.ts';
import { record, selected } from './results.ts';

const problems = (rs: CellResult[]) => rs.filter((r) => r.violations.length > 0).map((r) => `${r.operation} × ${r.step ?? r.fault}: ${r.violations.join('; ')}`);

for (const op of [...OPERATIONS, ...BACKUP_OPERATIONS, ...LINK_OPERATIONS]) {
  const any = selected(op, 'none') || selected(op, 'crash@0') || (process.env.QUEEN_CHAOS_CELLS ?? '').split(',').some((f) => f.trim().toLowerCase().startsWith(`${op.toLowerCase()}:crash`));
  it.skipIf(!any)(`${op}: finishes after a crash at each of its steps`, async () => {
    const results: CellResult[] = [];
    let ids = recordedSteps(op).map((s) => s.id);
    if (selected(op, 'none')) {
      const base = await runCell(op, { kind: 'none' });
      record(base);
      results.push(base);
      // The steps this operation takes here, as Temporal recorded them.
      if (base.activities.length) ids = base.activities.map((a) => Number(a.split(':')[0]));
    }
    for (const id of ids) {
      if (!selected(op, `crash@${id}`)) continue;
      const r = await runCell(op, { kind: 'crash', activityId: id });
      record(r);
      results.push(r);
    }
    expect(problems(results)).toEqual([]);
  });
}

/** The operations the faults of the world hit, and which fault does not apply to which. */
const FAULT_OPERATIONS: OperationName[] = ['RollingUpgrade', 'ScaleUp'];
const applies = (fault: WorldFault, op: OperationName) => fault !== 'leader-mid-promote' || DEFS[op].workflow === 'scaleVoters';

for (const fault of WORLD_FAULTS) {
  for (const op of FAULT_OPERATIONS) {
    it.skipIf(!applies(fault, op) || !selected(op, fault))(`${op} × ${fault}: finishes, or says what a person has to do`, async () => {
      const r = await runCell(op, { kind: fault });
      record(r);
      expect(problems([r])).toEqual([]);
    });
  }
}
