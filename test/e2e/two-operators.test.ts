// e2e `two-operators`: the installed operator's two replicas against one cluster (HA without
// leader election) form it once: Temporal refuses a second start of the cluster's running
// operation, and both replicas share the task queue.
import { afterAll, expect, it } from 'vitest';
import { createCluster, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns, workflowRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('two-operators: two replicas of one Deployment, one FormCluster run', async () => {
  s = await scenario('two');
  const op = await s.install({}, { replicas: 2 });
  expect(new Set((await op.pods(s.core)).map((p) => p.status?.podIP)).size).toBe(2);
  await createCluster(s, seedSpec());
  await waitForCluster(s, 'Ready', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 240_000);
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([['formCluster', 'COMPLETED']]);
  const observers = await workflowRuns(s, `queencluster-observer/${s.ns}/queen`);
  expect(observers.filter((r) => r.status === 'RUNNING')).toHaveLength(1);
  // Both replicas watched and worked, and neither was refused anything.
  const log = s.operatorLog();
  expect(log.match(/"msg":"watcher running"/g)).toHaveLength(2);
  expect(log).not.toMatch(/forbidden|HTTP-Code: 403\b/i);
});
