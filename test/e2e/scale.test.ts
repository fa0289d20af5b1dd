// e2e `scale`: seed 000's "Change the voters". 3 to 5 under load: pods first, each new node as a
// learner, both promoted in one change, so the cluster never rests on four voters. 5 to 3: each
// node leaves the membership while its pod still runs, then the pods above it go, then their
// volume claims (the operator deletes them itself). Before the first node leaves, the pods of both
// are taken out of the client Service and the requests in flight on them finish: under 200 pushes a second, every
// push is acknowledged on its first try, and nothing acknowledged is lost.
import { afterEach, expect, it } from 'vitest';
import { startLoad } from '../testbed/load.ts';
import { BIG_STORE, BIG_STORE_MESSAGES, buildStore, clusterEvents, expectEveryPushFirstTry, formed, getCluster, LOAD_RATE, patchSpec, pods, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { SCALE_DOWN_5_TO_3, SCALE_UP_3_TO_5 } from './steps.ts';
import { recordHistory, workflowRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const SCALE_STEPS = ['ScalePods', 'AddLearner', 'Promote', 'RemoveMember', 'DeleteClaim', 'RestartPod'];

/** Every pod of the cluster takes client connections again (its serving label, as kubectl -L shows it). */
async function expectAllServing(sc: Scenario) {
  await waitFor(
    'every pod serving',
    async () => (await pods(sc)).every((p) => !p.metadata?.deletionTimestamp && p.metadata?.labels?.['queenmq.com/serving'] === 'true'),
    30_000,
  );
}

it('scale: 3 to 5 voters and back to 3 under load', async () => {
  // A store of about 200 MB: each new learner's snapshot takes about 13 s to cross the link.
  s = await scenario('scale', { sim: BIG_STORE });
  await formed(s, seedSpec());
  await buildStore(s, BIG_STORE_MESSAGES);
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: LOAD_RATE });
  // The voter counts status shows, in order, going up and then going down.
  const voterCounts: { up: number[]; down: number[] } = { up: [], down: [] };
  let phase: 'up' | 'down' | null = 'up';
  const sampler = (async () => {
    while (phase) {
      const q = await getCluster(s!).catch(() => null);
      const n = q?.status?.voters?.length;
      const seen = phase ? voterCounts[phase] : [];
      if (n !== undefined && seen.at(-1) !== n) seen.push(n);
      await sleep(100);
    }
  })();

  await patchSpec(s, { replicas: 5 });
  const up = await waitForCluster(s, 'five voters', (q) => JSON.stringify(q.status?.voters) === '[1,2,3,4,5]' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'ScaleVoters', 300_000);
  expect(up.status?.members?.every((m) => m.voter && m.live && m.ready)).toBe(true);
  const upSteps = (await clusterEvents(s)).filter((e) => SCALE_STEPS.includes(e.reason!)).map((e) => e.message);
  expect(upSteps).toEqual(SCALE_UP_3_TO_5);
  const upRun = (await workflowRuns(s, `queencluster/${s.ns}/queen`)).find((r) => r.type === 'scaleVoters')!;
  await recordHistory(s, upRun, 'scaleVoters-up');

  phase = 'down';
  await patchSpec(s, { replicas: 3 });
  const down = await waitForCluster(s, 'three voters', (q) => JSON.stringify(q.status?.voters) === '[1,2,3]' && q.status?.phase === 'Ready' && q.status?.lastOperation?.target === '3 voters', 300_000);
  phase = null;
  await sampler;
  await sleep(1000);
  const report = await expectEveryPushFirstTry(s, load, 'scale 3→5→3');
  expect(down.status?.members?.map((m) => m.pod)).toEqual(['queen-0', 'queen-1', 'queen-2']);
  const events = await clusterEvents(s);
  const downSteps = events.filter((e) => SCALE_STEPS.includes(e.reason!)).map((e) => e.message ?? '').slice(upSteps.length);
  // Each node's pod left the client Service before the node left the membership: the pods of both
  // nodes in one drain, before the first of them leaves. A leader among them is stopped once to hand
  // off first: the other's pod is drained with it, and its successor is drained again before its
  // node leaves, unless it was not Ready yet (no client could reach it: no drain, no Event).
  const leaveEvents = events.filter((e) => (e.reason === 'DrainPod' && / the membership$/.test(e.message ?? '')) || e.reason === 'RemoveMember').map((e) => e.message!);
  for (const [i, m] of leaveEvents.entries()) {
    const node = /^removing node (\d) from the membership$/.exec(m)?.[1];
    if (!node) continue;
    const lastDrain = leaveEvents.slice(0, i).findLast((x) => x.startsWith('taking ')) ?? '';
    const drainedPods = (/^taking pods? ([\d, and]+) out of/.exec(lastDrain)?.[1] ?? '').match(/\d/g) ?? [];
    expect(drainedPods, `the drain before node ${node} left: ${lastDrain}`).toContain(String(Number(node) - 1));
  }
  if (!downSteps.some((m) => /leads: stopping its pod once/.test(m))) {
    expect(leaveEvents).toEqual([
      'taking pods 3 and 4 out of the client Service before nodes 5 and 4 leave the membership',
      'removing node 5 from the membership',
      'removing node 4 from the membership',
    ]);
  }
  // Node 5 and node 4 leave before their pods go (together); a leader among them hands off first.
  const without = downSteps.filter((m) => !/leads: stopping its pod once/.test(m));
  expect(without).toEqual(SCALE_DOWN_5_TO_3);
  expect((await pods(s)).map((p) => p.metadata?.name)).toEqual(['queen-0', 'queen-1', 'queen-2']);
  // The claims are deleted; pvc-protection lets them go once their pods are gone.
  const claimNames = async () => (await s!.core.listNamespacedPersistentVolumeClaim({ namespace: s!.ns })).items.map((c) => c.metadata?.name).sort();
  await waitFor('the claims of pods 3 and 4 gone', async () => JSON.stringify(await claimNames()) === JSON.stringify(['data-queen-0', 'data-queen-1', 'data-queen-2']), 60_000);
  // Going up, both new nodes are promoted in one change: never four voters to rest on. Going down,
  // one node leaves at a time (seed 000), so four voters may show for a moment, never more again.
  expect(voterCounts.up).toEqual([3, 5]);
  expect([[5, 3], [5, 4, 3]]).toContainEqual(voterCounts.down);
  console.log(`scale: voters shown ${voterCounts.up.join('→')} then ${voterCounts.down.join('→')}; ${report.acknowledged} acknowledged`);
  await expectAllServing(s);
  const downRun = (await workflowRuns(s, `queencluster/${s.ns}/queen`)).filter((r) => r.type === 'scaleVoters').at(-1)!;
  await recordHistory(s, downRun, 'scaleVoters-down');
});

it('scale: 3 to 1 voter and back under load', async () => {
  s = await scenario('scaleone');
  await formed(s, seedSpec());
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: LOAD_RATE });
  await patchSpec(s, { replicas: 1 });
  const one = await waitForCluster(s, 'one voter', (q) => JSON.stringify(q.status?.voters) === '[1]' && q.status?.phase === 'Ready' && q.status?.commits === true, 300_000);
  expect(one.status?.members?.map((m) => m.pod)).toEqual(['queen-0']);
  await patchSpec(s, { replicas: 3 });
  const three = await waitForCluster(s, 'three voters again', (q) => JSON.stringify(q.status?.voters) === '[1,2,3]' && q.status?.phase === 'Ready', 300_000);
  expect(three.status?.members?.every((m) => m.voter && m.live && m.ready)).toBe(true);
  await sleep(1000);
  await expectEveryPushFirstTry(s, load, 'scale 3→1→3');
  await expectAllServing(s);
  // The nodes came back on new, empty volumes as learners: never under their old ids with old data.
  const steps = (await clusterEvents(s)).filter((e) => e.reason === 'AddLearner' || e.reason === 'Promote').map((e) => e.message);
  expect(steps).toEqual(['adding node 2 as a learner', 'adding node 3 as a learner', 'promoting nodes 2 and 3 to voters']);
});
