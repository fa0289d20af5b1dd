// e2e `removed-node-back` (issue 8, item 12): a node that left the membership never comes back with
// its old data. A scale from 3 voters to 1 fails after nodes 3 and 2 left the membership and before
// their pods went: a policy of the cluster refuses every update of the StatefulSet (the step ends,
// Blocked with the API server's words). Pods 1 and 2 keep running on the data of nodes 2 and 3. The
// policy goes and 3 voters are asked again: before either node is added as a learner, both pods get
// an empty volume in one step (each claim deleted by the UID observed), so each node copies
// everything from the leader instead of coming back with what it held, and no node that missed its
// removal is left running beside an empty one whose vote would make it lead (sim stale-member). Every message acknowledged before is on every
// voter. (A cancelled scale-down: scale-down-cancel.)
import { afterEach, expect, it } from 'vitest';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { clusterEvents, formed, freezeStatefulSets, patchSpec, scenario, seedSpec, sleep, voterIps, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const claimUid = async (sc: Scenario, ordinal: number) => (await sc.core.readNamespacedPersistentVolumeClaim({ namespace: sc.ns, name: `data-queen-${ordinal}` })).metadata?.uid;

it('removed-node-back: after a scale-down that stopped early, the removed node comes back on an empty volume', async () => {
  s = await scenario('nodeback');
  await formed(s, seedSpec());
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 50 });
  await sleep(4000);
  const report = await load.stop();
  expect(report.acknowledged).toBeGreaterThan(20);

  const lift = await freezeStatefulSets(s);

  await patchSpec(s, { replicas: 1 });
  const stopped = await waitForCluster(s, 'the scale-down stopped after nodes 3 and 2 left', (q) => q.status?.lastOperation?.type === 'ScaleVoters' && q.status.lastOperation.result === 'Failed', 120_000);
  expect(stopped.status?.lastOperation?.message).toMatch(/^changing the voters to 1 voter failed: removing the pods above node 1: the API server refused it \(403\): .*frozen by the change policy; to resume: /);
  await waitForCluster(s, 'one voter', (q) => JSON.stringify(q.status?.voters) === '[1]', 30_000);
  const oldClaims = [await claimUid(s, 1), await claimUid(s, 2)];

  await lift();
  await patchSpec(s, { replicas: 3 });
  const back = await waitForCluster(s, 'three voters again', (q) => JSON.stringify(q.status?.voters) === '[1,2,3]' && q.status?.phase === 'Ready' && q.status?.lastOperation?.target === '3 voters', 300_000);
  expect(back.status?.lastOperation?.result).toBe('Succeeded');
  const steps = (await clusterEvents(s)).filter((e) => ['RemoveMember', 'WipeVolume', 'AddLearner', 'Promote'].includes(e.reason!)).map((e) => e.message);
  expect(await claimUid(s, 1), steps.join('\n')).not.toBe(oldClaims[0]);
  expect(await claimUid(s, 2), steps.join('\n')).not.toBe(oldClaims[1]);
  expect(steps).toEqual([
    'removing node 3 from the membership',
    'removing node 2 from the membership',
    'deleting the volume of pod 1: it holds the data node 2 had before it left the membership',
    'deleting the volume of pod 2: it holds the data node 3 had before it left the membership',
    'adding node 2 as a learner',
    'adding node 3 as a learner',
    'promoting nodes 2 and 3 to voters',
  ]);
  expect(await verifyAcknowledged(report, await voterIps(s))).toEqual([]);
});
