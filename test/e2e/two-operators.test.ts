// e2e `two-operators`: two operator processes against one cluster (HA without leader election)
// form it once: Temporal refuses a second start of the cluster's running operation.
import { afterAll, expect, it } from 'vitest';
import { createCluster, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns, workflowRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('two-operators: one FormCluster run', async () => {
  s = await scenario('two');
  s.startOperator('a');
  s.startOperator('b');
  await createCluster(s, seedSpec());
  await waitForCluster(s, 'Ready', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 240_000);
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([['formCluster', 'COMPLETED']]);
  const observers = await workflowRuns(s, `queencluster-observer/${s.ns}/queen`);
  expect(observers.filter((r) => r.status === 'RUNNING')).toHaveLength(1);
  for (const op of s.operators) expect(op.log()).not.toMatch(/forbidden|HTTP-Code: 403\b/i);
});
