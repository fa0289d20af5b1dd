// e2e `foreign-objects`: an object of the same name that this operator did not create (here the
// client Service of a cluster applied by hand from the manifest) is not taken over. The
// QueenCluster is Blocked, naming it, and nothing of the other cluster is touched.
import { AppsV1Api } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import { createCluster, scenario, seedSpec, sleep, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario;
afterAll(() => s?.close());

it('foreign-objects: Blocked with the name of the Service it did not create', async () => {
  s = await scenario('foreign');
  const mine = { metadata: { name: 'queen', labels: { app: 'queen' } }, spec: { selector: { app: 'queen' }, ports: [{ name: 'http', port: 6632, targetPort: 'http' as never }] } };
  await s.core.createNamespacedService({ namespace: s.ns, body: mine });
  await s.install();
  await createCluster(s, seedSpec());
  const blocked = await waitForCluster(s, 'Blocked on the Service', (q) => q.status?.phase === 'Blocked', 120_000);
  expect(blocked.status?.message).toBe(
    `a Service named queen already exists in namespace ${s.ns} and this operator did not create it: remove it, or give the QueenCluster another name`,
  );
  expect(blocked.status?.operation).toMatchObject({ type: 'FormCluster', gate: 'objects-ours' });
  await sleep(3000);
  const svc = await s.core.readNamespacedService({ namespace: s.ns, name: 'queen' });
  expect(svc.spec?.selector).toEqual({ app: 'queen' });
  expect(svc.metadata?.ownerReferences ?? []).toEqual([]);
  const sts = await s.kc.makeApiClient(AppsV1Api).listNamespacedStatefulSet({ namespace: s.ns });
  expect(sts.items).toEqual([]);

  // Once it is gone, the formation goes on.
  await s.core.deleteNamespacedService({ namespace: s.ns, name: 'queen' });
  await waitForCluster(s, 'Ready', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 240_000);
});
