// e2e `replace`: seed 000's "Replace a node". A follower's volume is wiped behind the operator's
// back (the stale voter); the person annotates the pod; the operator takes the node out of the
// membership, deletes the volume (only the claim it recorded), adds the node back as a learner
// and promotes it once it caught up, then removes the annotation. Under 200 pushes a second: the
// client notices nothing (its pod leaves the client Service before the node leaves the
// membership, every push is acknowledged on its first try), and every acknowledged message is on
// every voter, the new one included. A leader is first stopped once so it hands leadership away,
// under the same load and with the same promise.
import { afterEach, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { startLoad } from '../testbed/load.ts';
import { annotate, BIG_STORE_MESSAGES, buildStore, clusterEvents, expectEveryPushFirstTry, formed, getCluster, LOAD_RATE, pods, REPLACE_STORE, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { replaceSteps } from './steps.ts';
import { recordHistory, settledRuns, workflowRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const STEPS = ['ReplaceStarted', 'RemoveMember', 'WipeVolume', 'AddLearner', 'Promote', 'ReplaceFinished'];

async function claimUid(sc: Scenario, ordinal: number) {
  return (await sc.core.readNamespacedPersistentVolumeClaim({ namespace: sc.ns, name: `data-queen-${ordinal}` })).metadata?.uid;
}

it('replace: a stale voter is replaced in the order that keeps the cluster whole', async () => {
  // A store of about 200 MB, growing by 3.3 MB a second under the load: the new learner's
  // snapshot (about 250 MB by then) takes about 13 s to cross the link (REPLACE_STORE says why
  // that link is 4 MB/s, not BIG_STORE's 3).
  s = await scenario('replace', { sim: REPLACE_STORE });
  await s.install({ stallAfter: '5s', probeInterval: '5s' });
  const qc = await formed(s, seedSpec());
  await buildStore(s, BIG_STORE_MESSAGES);
  // A cluster with some history: a wiped voter more than 1000 entries behind says 503 settling,
  // so no client is routed to it (closer than that it still says 200 and its clients hang: F2).
  const history = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 250, queue: 'history' });
  await waitFor('1100 messages of history acknowledged', async () => history.progress().acknowledged > 1100, 120_000);
  expect((await history.stop()).acknowledged).toBeGreaterThan(1100);
  const follower = [1, 2, 3].find((id) => id !== qc.status?.leader)!;
  const ordinal = follower - 1;
  await control.wipe(s.ns, `queen-${ordinal}`);
  await waitForCluster(s, 'the stale voter reported', (q) => /has to be replaced$/.test(q.status?.message ?? ''), 120_000);
  const oldClaim = await claimUid(s, ordinal);

  // The wiped voter answers 503 settling: its pod has not been Ready since its container started
  // again on the empty volume, so no client reaches it and its drain has nothing to wait for.
  const wiped = (await pods(s)).find((p) => p.metadata?.name === `queen-${ordinal}`);
  const wipedReady = wiped?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';

  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: LOAD_RATE });
  await sleep(2000);
  await annotate(s, { 'queenmq.com/replace-pod': `queen-${ordinal}` });
  const done = await waitForCluster(
    s,
    'the replacement done',
    (q) => q.status?.lastOperation?.type === 'ReplaceNode' && q.status.lastOperation.result === 'Succeeded' && q.status?.phase === 'Ready',
    300_000,
  );
  await sleep(2000);
  await expectEveryPushFirstTry(s, load, 'replace a follower');
  expect(done.metadata.annotations?.['queenmq.com/replace-pod']).toBeUndefined();
  expect(done.status?.voters).toEqual([1, 2, 3]);
  expect(await claimUid(s, ordinal)).not.toBe(oldClaim);

  const events = (await clusterEvents(s)).filter((e) => STEPS.includes(e.reason!)).map((e) => e.message);
  expect(events).toEqual(replaceSteps(ordinal, follower));
  // The pod left the client Service before its node left the membership: with a drain wait (and
  // its Event) only if clients could reach it.
  const drainAndLeave = (await clusterEvents(s)).filter((e) => e.reason === 'DrainPod' || e.reason === 'RemoveMember').map((e) => e.message);
  expect(drainAndLeave).toEqual([
    ...(wipedReady ? [`taking pod ${ordinal} out of the client Service before node ${follower} leaves the membership`] : []),
    `removing node ${follower} from the membership`,
  ]);
  const runs = (await settledRuns(s, `queencluster/${s.ns}/queen`)).filter((r) => r.type === 'replaceNode');
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  await recordHistory(s, runs[0]!, 'replaceNode');
  await expectServing(s);
});

/** Every pod takes client connections again once the replacement is done (kubectl get pods -L queenmq.com/serving). */
async function expectServing(sc: Scenario) {
  await waitFor('every pod serving', async () => (await pods(sc)).every((p) => p.metadata?.labels?.['queenmq.com/serving'] === 'true'), 30_000);
}

it('replace: the leader hands leadership away first', async () => {
  s = await scenario('replead');
  const qc = await formed(s, seedSpec());
  const leader = qc.status!.leader!;
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: LOAD_RATE });
  await sleep(2000);
  await annotate(s, { 'queenmq.com/replace-pod': `queen-${leader - 1}` });
  const done = await waitForCluster(s, 'the replacement done', (q) => q.status?.lastOperation?.type === 'ReplaceNode' && q.status?.phase === 'Ready', 300_000);
  await sleep(2000);
  await expectEveryPushFirstTry(s, load, 'replace the leader');
  await expectServing(s);
  expect(done.status?.leader).not.toBe(leader);
  const events = (await clusterEvents(s)).filter((e) => ['RestartPod', ...STEPS].includes(e.reason!)).map((e) => e.message);
  expect(events.slice(0, 3)).toEqual([
    `replacing pod ${leader - 1}`,
    `pod ${leader - 1} leads: stopping it once so it hands leadership away before it is removed`,
    `removing node ${leader} from the membership`,
  ]);
  expect(events.at(-1)).toBe(`pod ${leader - 1} is a voter again`);
  const runs = (await workflowRuns(s, `queencluster/${s.ns}/queen`)).filter((r) => r.type === 'replaceNode');
  await recordHistory(s, runs[0]!, 'replaceNode-leader');
});

it('replace: a pod that is not a voter, and the only voter, are refused (no replacement starts); removing the annotation ends it', async () => {
  s = await scenario('repbad');
  await formed(s, seedSpec());
  await annotate(s, { 'queenmq.com/replace-pod': 'queen-7' });
  const blocked = await waitForCluster(s, 'Blocked', (q) => q.status?.phase === 'Blocked', 60_000);
  expect(blocked.status?.message).toBe(
    'the pod asked to be replaced, "queen-7", is not a voter of this cluster: name a pod from queen-0 to queen-2 in queenmq.com/replace-pod, or remove it',
  );
  expect(blocked.status?.operation ?? null).toBeNull();
  await annotate(s, { 'queenmq.com/replace-pod': null });
  await waitForCluster(s, 'Ready again', (q) => q.status?.phase === 'Ready' && !q.status?.operation, 60_000);

  await formed(s, seedSpec({ replicas: 1 }), 'single');
  await annotate(s, { 'queenmq.com/replace-pod': 'single-0' }, 'single');
  const only = await waitForCluster(s, 'Blocked', (q) => q.status?.phase === 'Blocked', 60_000, 'single');
  expect(only.status?.message).toMatch(/^single-0 is the only voter: replacing it would lose every committed write/);
  await annotate(s, { 'queenmq.com/replace-pod': null }, 'single');
  const after = await waitForCluster(s, 'Ready again', (q) => q.status?.phase === 'Ready' && !q.status?.operation, 60_000, 'single');
  // Refused before anything started: the last operation is still the formation.
  expect(after.status?.lastOperation?.type).toBe('FormCluster');
  const events = await clusterEvents(s, 'single');
  expect(events.filter((e) => e.reason === 'ReplaceRefused').map((e) => [e.type, e.message])).toEqual([
    ['Warning', 'single-0 is the only voter: replacing it would lose every committed write; restore the cluster from a backup instead and remove the queenmq.com/replace-pod annotation'],
  ]);
  expect(events.filter((e) => e.reason === 'RemoveMember' || e.reason === 'WipeVolume' || e.reason === 'ReplaceStarted')).toEqual([]);
});

it('replace: the annotation removed before the node left the membership calls it off (G9)', async () => {
  s = await scenario('repoff');
  // Pods Ready for less than a minute hold the leader's hand-off back.
  const qc = await formed(s, seedSpec({ minReadySeconds: 120 }));
  const leader = qc.status!.leader!;
  await annotate(s, { 'queenmq.com/replace-pod': `queen-${leader - 1}` });
  await waitForCluster(s, 'the hand-off held', (q) => (q.status?.message ?? '').startsWith(`pod ${leader - 1} leads: `), 60_000);
  await annotate(s, { 'queenmq.com/replace-pod': null });
  const after = await waitForCluster(s, 'called off', (q) => q.status?.lastOperation?.type === 'ReplaceNode' && !q.status?.operation, 60_000);
  expect(after.status?.lastOperation?.message).toMatch(/called off before node \d left the membership/);
  expect((await clusterEvents(s)).filter((e) => ['RestartPod', 'RemoveMember', 'WipeVolume'].includes(e.reason!))).toEqual([]);
  expect((await getCluster(s)).status?.voters).toEqual([1, 2, 3]);
});
