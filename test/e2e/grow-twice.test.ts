// e2e `grow-twice` (issue 8, item 10): a second raise of storage.size during a grow retargets the
// running grow. Every volume finishes growing only when its pod restarts; the size goes 1Gi to
// 2Gi, and to 3Gi once the grow asked the first claim for 2Gi. The grow asks every claim for
// 3Gi, restarts one pod at a time, creates the StatefulSet again with 3Gi claims and the pod count
// it had, and ends: its history stays small (no loop between a step that reads 3Gi and one that
// asks for 2Gi).
import { AppsV1Api } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { clusterEvents, formed, monitor, patchSpec, scenario, seedSpec, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { historyEvents, recordHistory, settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('grow-twice: 1Gi to 2Gi, then 3Gi during the grow; the grow retargets and ends with every volume 3Gi', async () => {
  s = await scenario('growtwice');
  // A node that does not say it cannot grow a mounted file system (an older kubelet): the grow
  // gives each file system its moments to grow online (ONLINE_EXPANSION_MS), the time the second
  // raise lands in, before it restarts the pod.
  await control.call('POST', '/storage/resize-pending', { share: 1, namespace: s.ns, nodeSilent: true });
  await formed(s, seedSpec({ storage: { size: '1Gi' } }));
  const watch = await monitor(s);
  await patchSpec(s, { storage: { size: '2Gi' } });
  await waitFor('the first claim asked for 2Gi', async () => (await clusterEvents(s!)).some((e) => e.reason === 'ExpandClaim'), 120_000);
  await patchSpec(s, { storage: { size: '3Gi' } });

  const done = await waitForCluster(s, 'every volume 3Gi', (q) => q.status?.lastOperation?.type === 'GrowVolumes' && q.status?.phase === 'Ready', 300_000);
  await watch.stop();
  expect(done.status?.lastOperation).toMatchObject({ result: 'Succeeded', message: 'every volume is 3Gi' });
  for (const c of (await s.core.listNamespacedPersistentVolumeClaim({ namespace: s.ns })).items) {
    expect(c.spec?.resources?.requests?.storage, c.metadata?.name).toBe('3Gi');
    expect(c.status?.capacity?.storage, c.metadata?.name).toBe('3Gi');
  }
  const sts = await s.kc.makeApiClient(AppsV1Api).readNamespacedStatefulSet({ namespace: s.ns, name: 'queen' });
  expect(sts.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage).toBe('3Gi');
  expect(sts.spec?.replicas).toBe(3);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  const runs = (await settledRuns(s, `queencluster/${s.ns}/queen`)).filter((r) => r.type === 'growVolumes');
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  // A few steps per claim and per pod: a loop would have written thousands of events.
  const events = await historyEvents(s, runs[0]!);
  expect(events.length).toBeLessThan(400);
  await recordHistory(s, runs[0]!, 'growVolumes-retarget');
});
