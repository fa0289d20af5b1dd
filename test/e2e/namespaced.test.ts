// e2e `namespaced`: deploy/namespaced.yaml in namespace A, told to watch A and B but bound in A
// only. It forms A's cluster; it has no rights in B (the API server says so) and says so once in
// its log, naming what to do; a QueenCluster created in B is left alone; it is Ready all the while.
import { afterAll, expect, it } from 'vitest';
import { createCluster, createSecret, formed, kubectl, scenario, seedSpec, sleep, waitFor, type Scenario } from './harness.ts';

let a: Scenario;
let b: Scenario;
afterAll(async () => {
  await a?.close();
  await b?.close();
});

it('namespaced: runs A, has no rights in B and says so once', async () => {
  a = await scenario('nsa');
  b = await scenario('nsb');
  await createSecret(b.core, b.ns).catch(() => undefined);
  const op = await a.install({ extra: [`--namespace=${b.ns}`] });
  await formed(a, seedSpec({ replicas: 1 }));

  // No rights in B, as the API server sees it.
  const sa = `system:serviceaccount:${a.ns}:queen-operator`;
  for (const [verb, resource] of [['list', 'queenclusters.queenmq.com'], ['delete', 'pods'], ['patch', 'persistentvolumeclaims']]) {
    expect((await kubectl(['auth', 'can-i', verb!, resource!, '-n', b.ns, `--as=${sa}`])).stdout.trim()).toBe('no');
    expect((await kubectl(['auth', 'can-i', verb!, resource!, '-n', a.ns, `--as=${sa}`])).stdout.trim()).toBe('yes');
  }
  await createCluster(b, seedSpec({ replicas: 1 }));
  await sleep(15_000);
  const inB = (await b.custom.getNamespacedCustomObject({ group: 'queenmq.com', version: 'v1alpha1', namespace: b.ns, plural: 'queenclusters', name: 'queen' })) as { status?: unknown };
  expect(inB.status ?? null).toBeNull();
  expect((await b.core.listNamespacedPod({ namespace: b.ns })).items).toEqual([]);

  const said = op.log().split('\n').filter((l) => l.includes(`this operator has no rights in namespace ${b.ns}`));
  expect(said).toHaveLength(1);
  expect(said[0]).toContain(`bind the ClusterRole queen-operator in namespace ${b.ns} with a RoleBinding`);
  // Ready: what it may watch has synced.
  await waitFor('the operator Ready', async () => (await op.ready(a.core, 1, 5000).catch(() => undefined)) ?? undefined, 30_000);
});
