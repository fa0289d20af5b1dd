// e2e `operator-crash`: in the middle of FormCluster, the operator replica that runs the current
// step is deleted by force (`kubectl delete pod --grace-period=0 --force`, as a node that dies):
// the other replica takes the step over and finishes the formation; the same workflow run goes
// on, nothing is created twice.
import { AppsV1Api } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import { createCluster, kubectl, scenario, seedSpec, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { currentStep, settledRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('operator-crash: FormCluster survives the forced deletion of the replica running its step', async () => {
  s = await scenario('crash');
  const op = await s.install({}, { replicas: 2 });
  await createCluster(s, seedSpec());
  // In the middle: the objects exist and the workflow waits for the pods.
  await waitForCluster(s, 'FormCluster waiting for the pods', (q) => q.status?.operation?.type === 'FormCluster' && /waiting/.test(q.status?.operation?.step ?? ''), 120_000);
  const apps = s.kc.makeApiClient(AppsV1Api);
  const sts = await apps.readNamespacedStatefulSet({ namespace: s.ns, name: 'queen' });
  const step = await waitFor('the replica running the step', () => currentStep(s, `queencluster/${s.ns}/queen`).then((x) => x ?? undefined), 30_000);
  const replicas = (await op.pods(s.core)).map((p) => p.metadata!.name!);
  expect(replicas).toContain(step.pod);
  console.log(`deleting ${step.pod} by force while it runs ${step.activity}`);
  const del = await kubectl(['-n', s.ns, 'delete', 'pod', step.pod, '--grace-period=0', '--force']);
  expect(del.code).toBe(0);

  await waitForCluster(s, 'Ready after the crash', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 240_000);
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([['formCluster', 'COMPLETED']]);
  const after = await apps.readNamespacedStatefulSet({ namespace: s.ns, name: 'queen' });
  expect(after.metadata?.uid).toBe(sts.metadata?.uid);
  const services = await s.core.listNamespacedService({ namespace: s.ns, labelSelector: 'app.kubernetes.io/instance=queen' });
  expect(services.items.map((x) => x.metadata?.name).sort()).toEqual(['queen', 'queen-headless']);
  // The Deployment made a new replica; the deleted one is gone.
  const now = await op.ready(s.core, 2);
  expect(now.map((p) => p.metadata?.name)).not.toContain(step.pod);
});
