// e2e `upgrade-operator-crash`: at a random moment of the upgrade, the operator replica running
// its step is deleted by force: the other replica finishes the upgrade, no pod restarted twice,
// never a second voter down, nothing acknowledged lost.
import { afterAll, expect, it } from 'vitest';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { formed, kubectl, monitor, patchSpec, scenario, seedSpec, sleep, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { currentStep, recordHistory, settledRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('upgrade-operator-crash: completes after SIGKILL, each pod restarted once', async () => {
  s = await scenario('upcrash');
  const op = await s.install({}, { replicas: 2 });
  await formed(s, seedSpec());
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 50 });
  const watch = await monitor(s);
  await patchSpec(s, { version: '2.6.1' });
  await waitForCluster(s, 'the upgrade running', (q) => q.status?.operation?.type === 'RollingUpgrade', 60_000);
  const delay = 2000 + Math.floor(Math.random() * 15_000);
  console.log(`killing the operator ${delay} ms into the upgrade`);
  await sleep(delay);
  const step = await waitFor('the replica running a step', () => currentStep(s, `queencluster/${s.ns}/queen`).then((x) => x ?? undefined), 60_000);
  console.log(`deleting ${step.pod} by force while it runs ${step.activity}`);
  expect((await kubectl(['-n', s.ns, 'delete', 'pod', step.pod, '--grace-period=0', '--force'])).code).toBe(0);
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'RollingUpgrade', 600_000);
  await watch.stop();
  const report = await load.stop();
  expect(await verifyAcknowledged(report, await voterIps(s))).toEqual([]);
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`)).toHaveLength(2);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  const runs = (await settledRuns(s, `queencluster/${s.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade');
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  await recordHistory(s, runs[0]!, 'rollingUpgrade-operator-crash');
  expect((await op.pods(s.core)).map((p) => p.metadata?.name)).not.toContain(step.pod);
});
