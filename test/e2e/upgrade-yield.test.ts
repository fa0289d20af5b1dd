// e2e `upgrade-yield`: a more urgent operation needed in the middle of an upgrade. Here the
// client Service is deleted: the cluster has to be formed again (its objects repaired), which
// comes before any roll. The watcher signals the upgrade, which stops at its next safe point and
// ends as yielded; the repair runs; then the watcher starts the upgrade again, which finishes
// the pods still on the old version.
import { afterAll, expect, it } from 'vitest';
import { clusterEvents, formed, monitor, patchSpec, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { recordHistory, workflowRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('upgrade-yield: the upgrade yields to the repair, then finishes', async () => {
  s = await scenario('yield');
  await formed(s, seedSpec());
  const watch = await monitor(s);
  await patchSpec(s, { version: '2.6.1' });
  await waitFor('the first restart', async () => (await clusterEvents(s)).some((e) => e.reason === 'RestartPod'), 120_000);
  await s.core.deleteNamespacedService({ namespace: s.ns, name: 'queen' });
  const yielded = await waitForCluster(s, 'the upgrade yielded', (q) => q.status?.lastOperation?.result === 'Yielded' || q.status?.operation?.type === 'FormCluster', 120_000);
  expect(['Yielded', 'Succeeded']).toContain(yielded.status?.lastOperation?.result);
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded', 300_000);
  await watch.stop();
  const runs = await workflowRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => r.type)).toEqual(['formCluster', 'rollingUpgrade', 'formCluster', 'rollingUpgrade']);
  const yieldedRun = await s.temporal.workflow.getHandle(runs[1]!.workflowId, runs[1]!.runId).result();
  expect(yieldedRun).toMatch(/^the upgrade to 2\.6\.1 yielded to FormCluster after restarting pod \d: /);
  await recordHistory(s, runs[1]!, 'rollingUpgrade-yielded');
  expect((await s.core.readNamespacedService({ namespace: s.ns, name: 'queen' })).metadata?.name).toBe('queen');
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`)).toHaveLength(2);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
});
