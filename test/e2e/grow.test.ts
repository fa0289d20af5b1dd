// e2e `grow`: seed 000's "Grow the volumes". Every claim asks for the new size; a volume whose file
// system waits for its pod is finished by restarting that pod (through the stop gate); then the
// StatefulSet is created again around its running pods, which are not restarted by that. A class
// that does not allow expansion answers through the status, in the API server's words. Under 200
// pushes a second, with and without the restarts: every push acknowledged on its first try, none lost.
import { AppsV1Api } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { startLoad } from '../testbed/load.ts';
import { clusterEvents, expectEveryPushFirstTry, formed, LOAD_RATE, monitor, patchSpec, scenario, seedSpec, sleep, voterIps, waitForCluster, type Scenario } from './harness.ts';
import { recordHistory, workflowRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it.each([
  ['every file system waits for its pod', 1],
  ['no file system waits', 0],
] as const)('grow: 1Gi to 2Gi under load (%s): the pods whose file system waits restarted one at a time, the StatefulSet recreated', async (_what, share) => {
  s = await scenario(share ? 'grow' : 'growonline');
  await control.call('POST', '/storage/resize-pending', { share, namespace: s.ns });
  await formed(s, seedSpec({ storage: { size: '1Gi' } }));
  const apps = s.kc.makeApiClient(AppsV1Api);
  const stsBefore = (await apps.readNamespacedStatefulSet({ namespace: s.ns, name: 'queen' })).metadata?.uid;
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: LOAD_RATE });
  await sleep(2000);
  const watch = await monitor(s);
  await patchSpec(s, { storage: { size: '2Gi' } });
  await waitForCluster(s, 'every volume 2Gi', (q) => q.status?.lastOperation?.type === 'GrowVolumes' && q.status?.phase === 'Ready', 300_000);
  // The grow ended with the pods it restarted Ready again.
  const pods = (await s.core.listNamespacedPod({ namespace: s.ns, labelSelector: 'app.kubernetes.io/name=queen' })).items;
  const notReady = pods.filter((p) => !p.metadata?.deletionTimestamp && !p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
  expect(notReady.map((p) => p.metadata?.name)).toEqual([]);
  expect(pods.filter((p) => !p.metadata?.deletionTimestamp)).toHaveLength(3);
  await sleep(2000);
  await watch.stop();
  await expectEveryPushFirstTry(s, load, share ? 'grow with restarts' : 'grow online');
  const claims = (await s.core.listNamespacedPersistentVolumeClaim({ namespace: s.ns })).items;
  for (const c of claims) {
    expect(c.spec?.resources?.requests?.storage, c.metadata?.name).toBe('2Gi');
    expect(c.status?.capacity?.storage, c.metadata?.name).toBe('2Gi');
    expect(c.status?.conditions?.some((x) => x.type === 'FileSystemResizePending') ?? false).toBe(false);
  }
  const sts = await apps.readNamespacedStatefulSet({ namespace: s.ns, name: 'queen' });
  expect(sts.metadata?.uid).not.toBe(stsBefore);
  expect(sts.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage).toBe('2Gi');
  const events = await clusterEvents(s);
  const restarted = events.filter((e) => e.reason === 'RestartPod').map((e) => Number(/pod (\d)/.exec(e.message ?? '')![1]));
  expect(restarted.sort()).toEqual(share ? [0, 1, 2] : []);
  // Each pod left the client Service before it restarted.
  const drained = events.filter((e) => e.reason === 'DrainPod').map((e) => e.message);
  expect(drained.sort()).toEqual(restarted.map((o) => `taking pod ${o} out of the client Service before it restarts`));
  expect(events.filter((e) => e.reason === 'RestartPod').every((e) => /^restarting pod \d to finish growing its volume$/.test(e.message ?? ''))).toBe(true);
  // Only the pods that needed it restarted; the StatefulSet's re-creation restarted nobody.
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`), `queen-${o}`).toHaveLength(restarted.includes(o) ? 2 : 1);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  expect(events.filter((e) => e.reason === 'ExpandClaim').map((e) => e.message)).toEqual([0, 1, 2].map((o) => `growing the volume of pod ${o} to 2Gi`));
  expect(events.filter((e) => e.reason === 'RecreateStatefulSet').map((e) => e.message)).toEqual(['recreating the StatefulSet with 2Gi volumes; its pods keep running']);
  const run = (await workflowRuns(s, `queencluster/${s.ns}/queen`)).find((r) => r.type === 'growVolumes')!;
  if (share) await recordHistory(s, run, 'growVolumes');
});

it('grow: a class that does not allow expansion is Blocked with the API server\'s words', async () => {
  s = await scenario('growfixed');
  await formed(s, seedSpec({ storage: { size: '1Gi', storageClassName: 'queen-fixed' } }));
  await patchSpec(s, { storage: { size: '2Gi', storageClassName: 'queen-fixed' } });
  const blocked = await waitForCluster(s, 'Blocked', (q) => q.status?.phase === 'Blocked', 120_000);
  expect(blocked.status?.message).toBe(
    'the volume of pod 0 cannot grow: persistentvolumeclaims "data-queen-0" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize',
  );
  expect(blocked.status?.operation).toMatchObject({ type: 'GrowVolumes', gate: 'volume-can-grow' });
});

it('grow: a class that grows the file system while the pods run restarts nobody, and the brokers see the new size', async () => {
  s = await scenario('growonline');
  await formed(s, seedSpec({ storage: { size: '1Gi', storageClassName: 'queen-online' } }));
  const watch = await monitor(s);
  await patchSpec(s, { storage: { size: '2Gi', storageClassName: 'queen-online' } });
  await waitForCluster(s, 'every volume 2Gi', (q) => q.status?.lastOperation?.type === 'GrowVolumes' && q.status?.lastOperation?.result === 'Succeeded' && q.status?.phase === 'Ready', 300_000);
  await watch.stop();
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toEqual([]);
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`), `queen-${o}`).toHaveLength(1);
  // The running brokers' disk gate counts against the new size.
  for (const ip of await voterIps(s)) {
    const info = (await (await fetch(`http://${ip}:6632/_sim/info`)).json()) as { volumeBytes: number };
    expect(info.volumeBytes).toBe(2 * 1024 ** 3);
  }
});

it('grow: a size the storage refuses after the API server accepted it is Blocked with the storage\'s words', async () => {
  s = await scenario('growlimited');
  await formed(s, seedSpec({ storage: { size: '1Gi', storageClassName: 'queen-limited' } }));
  await patchSpec(s, { storage: { size: '3Gi', storageClassName: 'queen-limited' } });
  const blocked = await waitForCluster(s, 'Blocked', (q) => q.status?.phase === 'Blocked', 120_000);
  expect(blocked.status?.message).toMatch(
    /^the volume of pod \d cannot grow to 3Gi: resize volume "pvc-[0-9a-f-]+" by resizer "testbed\.queen\.local" failed: rpc error: code = OutOfRange desc = the requested size 3Gi exceeds the largest volume of class queen-limited, 2Gi$/,
  );
  expect(blocked.status?.operation).toMatchObject({ type: 'GrowVolumes', gate: 'volume-can-grow' });
});

it('grow: a storage backend that fails and retries is shown with its error, and the growth finishes once it answers', async () => {
  s = await scenario('growfailing');
  await formed(s, seedSpec({ storage: { size: '1Gi' } }));
  await control.setResizeFailing(s.ns, true);
  await patchSpec(s, { storage: { size: '2Gi' } });
  const failing = await waitForCluster(s, 'the resizer error shown', (q) => /but its storage fails and tries again/.test(q.status?.message ?? ''), 120_000);
  expect(failing.status?.phase).toBe('Resizing');
  expect(failing.status?.message).toMatch(/^the volume of pod \d is growing to 2Gi, but its storage fails and tries again: resize volume .* rpc error: code = Unavailable desc = the storage backend did not answer/);
  await control.setResizeFailing(s.ns, false);
  await waitForCluster(s, 'every volume 2Gi', (q) => q.status?.lastOperation?.type === 'GrowVolumes' && q.status?.lastOperation?.result === 'Succeeded' && q.status?.phase === 'Ready', 300_000);
});
