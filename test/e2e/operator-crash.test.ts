// e2e `operator-crash`: the operator killed with SIGKILL in the middle of FormCluster and started
// again finishes the formation: the same workflow run goes on, nothing is created twice.
import { AppsV1Api } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import { createCluster, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('operator-crash: FormCluster survives SIGKILL of the operator', async () => {
  s = await scenario('crash');
  const first = s.startOperator('first');
  await createCluster(s, seedSpec());
  // In the middle: the objects exist and the workflow waits for the pods.
  await waitForCluster(s, 'FormCluster waiting for the pods', (q) => q.status?.operation?.type === 'FormCluster' && /waiting/.test(q.status?.operation?.step ?? ''), 120_000);
  const apps = s.kc.makeApiClient(AppsV1Api);
  const sts = await apps.readNamespacedStatefulSet({ namespace: s.ns, name: 'queen' });
  await first.kill('SIGKILL');

  s.startOperator('second');
  await waitForCluster(s, 'Ready after the crash', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 240_000);
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([['formCluster', 'COMPLETED']]);
  const after = await apps.readNamespacedStatefulSet({ namespace: s.ns, name: 'queen' });
  expect(after.metadata?.uid).toBe(sts.metadata?.uid);
  const services = await s.core.listNamespacedService({ namespace: s.ns });
  expect(services.items.map((x) => x.metadata?.name).sort()).toEqual(['queen', 'queen-headless']);
});
