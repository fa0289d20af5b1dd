// e2e `delete-recreate`: deleting the QueenCluster removes its pods, StatefulSet, Services and
// disruption budget and keeps every volume claim; an object created again under the same name
// brings the same three voters back with their data.
import { AppsV1Api, PolicyV1Api } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { GROUP, PLURAL, VERSION } from '../../crd/schema.ts';
import { createCluster, formed, scenario, seedSpec, sleep, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario;
afterAll(() => s?.close());

it('delete-recreate: the claims stay, the voters come back with their data', async () => {
  s = await scenario('recreate');
  await formed(s, seedSpec());
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 20 });
  await sleep(5000);
  const report = await load.stop();
  expect(report.acknowledged).toBeGreaterThan(20);
  expect(await verifyAcknowledged(report, await voterIps(s))).toEqual([]);
  const claims = async () => (await s.core.listNamespacedPersistentVolumeClaim({ namespace: s.ns })).items.map((c) => `${c.metadata?.name}=${c.metadata?.uid}`).sort();
  const claimsBefore = await claims();
  expect(claimsBefore).toHaveLength(3);

  await s.custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: s.ns, plural: PLURAL, name: 'queen' });
  const apps = s.kc.makeApiClient(AppsV1Api);
  const policy = s.kc.makeApiClient(PolicyV1Api);
  await waitFor(
    'the pods, StatefulSet, Services and budget gone',
    async () => {
      // The cluster's objects: the operator, installed in the namespace, has a pod and a budget of its own.
      const labelSelector = 'app.kubernetes.io/instance=queen';
      const [p, st, sv, pdb] = await Promise.all([
        s.core.listNamespacedPod({ namespace: s.ns, labelSelector }),
        apps.listNamespacedStatefulSet({ namespace: s.ns, labelSelector }),
        s.core.listNamespacedService({ namespace: s.ns, labelSelector }),
        policy.listNamespacedPodDisruptionBudget({ namespace: s.ns, labelSelector }),
      ]);
      return p.items.length + st.items.length + sv.items.length + pdb.items.length === 0;
    },
    180_000,
  );
  expect(await claims()).toEqual(claimsBefore);

  await createCluster(s, seedSpec());
  const back = await waitForCluster(s, 'Ready again', (q) => q.status?.phase === 'Ready' && q.status?.commits === true && JSON.stringify(q.status?.voters) === '[1,2,3]', 240_000);
  expect(back.status?.version).toBe('2.6.0');
  expect(await claims()).toEqual(claimsBefore);
  // Every message acknowledged before the delete is on every voter.
  expect(await verifyAcknowledged(report, await voterIps(s))).toEqual([]);
});
