// e2e `standby-ops`: the operations of any cluster, on a standby (issue 35, item 4). A standby
// follows its source while a load client pushes through the source's client Service; then it is
// scaled 3 → 5 → 3, a follower of it is replaced, its volumes grow (each pod restarted in turn to
// finish its file system). Each operation ends Succeeded with the steps it takes on any cluster, the
// standby back in phase Standby, following its source within a second, and every message the
// source acknowledged is on every voter of the standby afterwards.
import type { CoreV1Event } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { startLoad, verifyAcknowledged, type Load } from '../testbed/load.ts';
import { annotate, clusterEvents, createCluster, monitor, patchSpec, pods, scenario, sleep, voterIps, waitFor, waitForCluster, type Monitor, type Scenario } from './harness.ts';
import { formSource, standbyFollowing, standbySpec } from './link-scenario.ts';
import { replaceSteps, SCALE_DOWN_5_TO_3, SCALE_UP_3_TO_5 } from './steps.ts';
import type { QueenCluster } from '../../crd/schema.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

/** A source under load through its client Service, and its standby `dr` following it. */
async function standbyUnderLoad(prefix: string): Promise<{ sc: Scenario; load: Load; watch: Monitor }> {
  const sc = (s = await scenario(prefix));
  await sc.install({ probeInterval: '5s' });
  await formSource(sc);
  const load = startLoad({ kubeConfig: sc.kc, namespace: sc.ns, service: 'queen', rate: 100, queue: 'orders' });
  await waitFor('the load under way', async () => load.progress().acknowledged > 200, 60_000);
  await createCluster(sc, standbySpec(), 'dr');
  await standbyFollowing(sc);
  return { sc, load, watch: await monitor(sc, 'dr') };
}

/** Until the standby's `type` operation Succeeded and it rests in Standby, following its source within a second. */
function doneAndFollowing(sc: Scenario, type: string, voters: string, extra: (q: QueenCluster) => boolean = () => true) {
  return waitForCluster(
    sc,
    `the standby's ${type} done and the standby following again`,
    (q) =>
      q.status?.lastOperation?.type === type &&
      q.status.lastOperation.result === 'Succeeded' &&
      !q.status.operation &&
      q.status.phase === 'Standby' &&
      JSON.stringify(q.status.voters) === voters &&
      q.status.standby?.state === 'following' &&
      (q.status.standby.lagSeconds ?? Infinity) < 1 &&
      extra(q),
    600_000,
    'dr',
  );
}

/**
 * The instant an operation is asked, a second after the last step before it: Events have whole
 * seconds, and a step said again (adding node 3 as a learner, at the formation and in a
 * replacement) is the same Event counted twice, at its last time.
 */
async function asking(): Promise<number> {
  await sleep(1100);
  return Math.floor(Date.now() / 1000) * 1000;
}

/** Steps of the standby of these reasons since `since`, as `kubectl describe` lists them. */
async function steps(sc: Scenario, reasons: string[], since: number): Promise<string[]> {
  const at = (e: CoreV1Event) => new Date((e.lastTimestamp ?? e.eventTime ?? 0) as Date).getTime();
  return (await clusterEvents(sc, 'dr')).filter((e) => reasons.includes(e.reason!) && at(e) >= since).map((e) => e.message ?? '');
}

/** The load stops; the source acknowledged every push, and every one is on every voter of the standby. */
async function everyAcknowledgedOnTheStandby(sc: Scenario, load: Load, what: string) {
  const report = await load.stop();
  expect(report.unacknowledged).toEqual([]);
  const ips = await voterIps(sc, 'dr');
  expect(await verifyAcknowledged(report, ips, { timeoutMs: 60_000 })).toEqual([]);
  console.log(`${what}: ${report.acknowledged} messages acknowledged by the source, all on the standby's ${ips.length} voters`);
}

/** The standby's phases as `kubectl get` showed them: the operation's, then Standby again; never Degraded or Blocked. */
function expectPhases(watch: Monitor, what: string, expected: string[]) {
  console.log(`${what}: the standby's phases ${watch.phases.join(' → ')}`);
  expect(watch.phases, watch.timeline.join('\n')).toEqual(expected);
}

it('standby-ops: a standby is scaled 3 to 5 voters and back to 3 while it follows its source under load', async () => {
  const { sc, load, watch } = await standbyUnderLoad('sbscale');
  const SCALE = ['ScalePods', 'AddLearner', 'Promote', 'RemoveMember', 'DeleteClaim'];
  const upAsked = await asking();
  await patchSpec(sc, { replicas: 5 }, 'dr');
  const five = await doneAndFollowing(sc, 'ScaleVoters', '[1,2,3,4,5]');
  expect(five.status?.lastOperation?.target).toBe('5 voters');
  expect(five.status?.members?.every((m) => m.voter && m.live && m.ready)).toBe(true);
  expect(await steps(sc, SCALE, upAsked)).toEqual(SCALE_UP_3_TO_5);

  const downAsked = await asking();
  await patchSpec(sc, { replicas: 3 }, 'dr');
  const three = await doneAndFollowing(sc, 'ScaleVoters', '[1,2,3]', (q) => q.status?.lastOperation?.target === '3 voters');
  expect(three.status?.members?.map((m) => m.pod)).toEqual(['dr-0', 'dr-1', 'dr-2']);
  const down = (await steps(sc, SCALE, downAsked)).filter((m) => !/leads: stopping its pod once/.test(m));
  expect(down).toEqual(SCALE_DOWN_5_TO_3);
  expect((await pods(sc, 'dr')).map((p) => p.metadata?.name)).toEqual(['dr-0', 'dr-1', 'dr-2']);
  const claimNames = async () => (await sc.core.listNamespacedPersistentVolumeClaim({ namespace: sc.ns })).items.map((c) => c.metadata!.name!).filter((n) => n.startsWith('data-dr-')).sort();
  await waitFor('the claims of pods 3 and 4 gone', async () => JSON.stringify(await claimNames()) === JSON.stringify(['data-dr-0', 'data-dr-1', 'data-dr-2']), 60_000);

  await watch.stop();
  expectPhases(watch, 'scale 3→5→3 of a standby', ['Standby', 'Scaling', 'Standby', 'Scaling', 'Standby']);
  await everyAcknowledgedOnTheStandby(sc, load, 'scale 3→5→3 of a standby');
});

it('standby-ops: a follower of a standby is replaced while the standby follows its source under load', async () => {
  const { sc, load, watch } = await standbyUnderLoad('sbreplace');
  const dr = await waitForCluster(sc, 'the standby\'s leader known', (q) => typeof q.status?.leader === 'number', 60_000, 'dr');
  // A follower: the highest node id that does not lead.
  const follower = [3, 2, 1].find((id) => id !== dr.status!.leader)!;
  const ordinal = follower - 1;
  const claimUid = async () => (await sc.core.readNamespacedPersistentVolumeClaim({ namespace: sc.ns, name: `data-dr-${ordinal}` })).metadata?.uid;
  const oldClaim = await claimUid();
  const REPLACE = ['ReplaceStarted', 'RemoveMember', 'WipeVolume', 'AddLearner', 'Promote', 'ReplaceFinished'];
  const asked = await asking();
  await annotate(sc, { 'queenmq.com/replace-pod': `dr-${ordinal}` }, 'dr');
  const done = await doneAndFollowing(sc, 'ReplaceNode', '[1,2,3]');
  expect(done.metadata.annotations?.['queenmq.com/replace-pod']).toBeUndefined();
  expect(done.status?.members?.every((m) => m.voter && m.live && m.ready)).toBe(true);
  expect(await claimUid()).not.toBe(oldClaim);
  expect(await steps(sc, REPLACE, asked)).toEqual(replaceSteps(ordinal, follower));

  await watch.stop();
  expectPhases(watch, 'replace a follower of a standby', ['Standby', 'Replacing', 'Standby']);
  // The new node holds the source's log as the others do: every acknowledged message is on it too.
  await everyAcknowledgedOnTheStandby(sc, load, 'replace a follower of a standby');
});

it('standby-ops: a standby\'s volumes grow, each pod restarted in turn, while it follows its source under load', async () => {
  const { sc, load, watch } = await standbyUnderLoad('sbgrow');
  // Every file system of the namespace waits for its pod to restart before it grows.
  await control.call('POST', '/storage/resize-pending', { share: 1, namespace: sc.ns });
  await patchSpec(sc, { storage: { size: '2Gi' } }, 'dr');
  await doneAndFollowing(sc, 'GrowVolumes', '[1,2,3]');
  for (const c of (await sc.core.listNamespacedPersistentVolumeClaim({ namespace: sc.ns })).items.filter((x) => x.metadata!.name!.startsWith('data-dr-'))) {
    expect(c.status?.capacity?.storage, c.metadata?.name).toBe('2Gi');
    expect(c.status?.conditions?.some((x) => x.type === 'FileSystemResizePending') ?? false).toBe(false);
  }
  const events = await clusterEvents(sc, 'dr');
  expect(events.filter((e) => e.reason === 'ExpandClaim').map((e) => e.message)).toEqual([0, 1, 2].map((o) => `growing the volume of pod ${o} to 2Gi`));
  const restarted = events.filter((e) => e.reason === 'RestartPod' && /to finish growing its volume$/.test(e.message ?? '')).map((e) => Number(/pod (\d)/.exec(e.message!)![1]));
  expect(restarted.sort()).toEqual([0, 1, 2]);
  expect(events.filter((e) => e.reason === 'RecreateStatefulSet').map((e) => e.message)).toEqual(['recreating the StatefulSet with 2Gi volumes; its pods keep running']);
  // One pod restarted at a time: never two voters of the standby down together.
  await watch.stop();
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`dr-${o}`), `dr-${o}`).toHaveLength(2);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  expectPhases(watch, 'grow the volumes of a standby', ['Standby', 'Resizing', 'Standby']);
  await everyAcknowledgedOnTheStandby(sc, load, 'grow the volumes of a standby');
});
