// e2e `upgrade` and `upgrade-five` (a file each, so the two run side by side): seed 000's Upgrade
// section. A formed cluster on 2.6.0, with a store of about 200 MB that each restarted pod
// replays (about 5 s) before it serves, goes to 2.6.1 while the load client pushes 200 messages
// a second through the client Service: every push acknowledged on its first try and none lost; the pods restart one at a time, the ones that do not lead from the
// highest ordinal, the leader last; exactly one leader change; never a second voter down; the
// status messages of the README in order; the restarts as Events and as activities in Temporal.
import { expect } from 'vitest';
import { startLoad } from '../testbed/load.ts';
import { BIG_STORE, BIG_STORE_MESSAGES, buildStore, clusterEvents, expectEveryPushFirstTry, formed, kubectl, LOAD_RATE, monitor, patchSpec, scenario, seedSpec, testbed, voterIps, waitForCluster, type Scenario } from './harness.ts';
import { activityTypes, recordHistory, settledRuns } from './temporal.ts';

/** The restart order the README promises: not-leaders from the highest ordinal down, the leader last. */
export function expectedOrder(voters: number, leader: number): number[] {
  const followers = Array.from({ length: voters }, (_, i) => voters - 1 - i).filter((o) => o !== leader - 1);
  return [...followers, leader - 1];
}

async function upgrade(prefix: string, replicas: 3 | 5, keep: (s: Scenario) => void) {
  const s = await scenario(prefix, { sim: BIG_STORE });
  keep(s);
  // 4Gi: at 200 pushes a second of 16 KiB the store grows by about 3 MB a second, and five pods
  // each replaying it take minutes (1Gi filled up before the last pod was Ready).
  await formed(s, seedSpec({ replicas, storage: { size: '4Gi' } }));
  await buildStore(s, BIG_STORE_MESSAGES);
  const before = await waitForCluster(s, 'Ready with the store', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 120_000);
  const leader = before.status!.leader!;
  const term = before.status!.term!;
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: LOAD_RATE });
  await new Promise((r) => setTimeout(r, 3000));
  const watch = await monitor(s);
  // At rest under client load, the followers' lag moves at every look of the observer (a second
  // here): that is no reason for a status write. The probe writes once in its interval (10 s).
  await new Promise((r) => setTimeout(r, 12_000));
  const writesAtRest = watch.writes.length;
  const what = watch.changed.map((fields) => fields.join(' ') || '(nothing)').join('; ');
  console.log(`${prefix}: ${writesAtRest} status writes in 12 s at rest under load${writesAtRest ? `, each changing: ${what}` : ''}`);
  await patchSpec(s, { version: '2.6.1' });
  const after = await waitForCluster(
    s,
    'every pod on 2.6.1 and Ready',
    (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded',
    600_000,
  );
  await new Promise((r) => setTimeout(r, 2000));
  await watch.stop();
  console.log(`${prefix}:\n  ${watch.timeline.join('\n  ')}`);
  // Nothing acknowledged is lost, and no client had to try twice.
  const report = await expectEveryPushFirstTry(s, load, prefix);
  return { s, before, after, leader, term, report, watch, writesAtRest };
}

/** The scenario for a cluster of `replicas` voters; the Scenario it made is given to `keep` at once, for the test to close. */
export async function upgradeUnderLoad(replicas: 3 | 5, keep: (s: Scenario) => void) {
  const { s, after, leader, term, report, watch, writesAtRest } = await upgrade(`upgrade${replicas}`, replicas, keep);
  expect(report.acknowledged).toBeGreaterThan(100);
  // The probe's writes (one or two in 12 s) and little else; a write a look would be 12.
  expect(writesAtRest).toBeLessThanOrEqual(4);

  // One pod at a time in the README's order, the leader last, each restarted once.
  const order = expectedOrder(replicas, leader);
  const restarts = (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => e.message);
  expect(restarts).toEqual(order.map((o) => `restarting pod ${o}`));
  for (let o = 0; o < replicas; o++) expect(watch.uids.get(`queen-${o}`)).toHaveLength(2);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  // Leadership moved once: one new term.
  expect(after.status!.term).toBe(term + 1);
  expect(after.status!.leader).not.toBe(leader);

  // The status said what it waited for, in the README's words, in order.
  const seen = watch.messages;
  const at = (m: string | RegExp) => seen.findIndex((x) => (typeof m === 'string' ? x === m : m.test(x)));
  for (let i = 1; i < order.length; i++) expect(at(`restarting pod ${order[i - 1]}`)).toBeLessThan(at(`restarting pod ${order[i]}`));
  expect(at(new RegExp(`^pod ${order[1]} is next: pod ${order[0]} (is not Ready|has been Ready for less than 5s)$`))).toBeGreaterThan(at(`restarting pod ${order[0]}`));
  expect(watch.phases.filter((p) => p !== 'Upgrading' && p !== 'Ready')).toEqual([]);
  // A restarted pod replaying its store is slow, not stale: never called one that has to be replaced.
  expect(watch.messages.filter((m) => /does not catch up|has to be replaced/.test(m))).toEqual([]);
  expect(after.status!.members!.every((m) => m.version === '2.6.1')).toBe(true);

  // kubectl describe lists the restarts.
  const describe = await kubectl(['-n', s.ns, 'describe', 'queencluster', 'queen']);
  for (const o of order) expect(describe.stdout).toContain(`restarting pod ${o}`);

  // Temporal: one RollingUpgrade run, one activity per step.
  const runs = (await settledRuns(s, `queencluster/${s.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade');
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  const steps = await activityTypes(s, runs[0]!);
  await recordHistory(s, runs[0]!, `rollingUpgrade-${replicas}-voters`);
  // One restart activity per pod (more only if the stop gate closed again at the last moment, in
  // which case that activity restarts nothing); each wait for the next pod ends in a restart or a
  // wait for the cluster to settle.
  const count = (t: string) => steps.filter((x) => x === t).length;
  expect(count('restartPod')).toBeGreaterThanOrEqual(replicas);
  expect(count('awaitNextRestart')).toBe(count('restartPod') + count('awaitSettled'));
  // The Web UI's HTTP API shows the same run and its history.
  const ui = testbed().temporal.uiUrl;
  const res = await fetch(`${ui}/api/v1/namespaces/default/workflows/${encodeURIComponent(runs[0]!.workflowId)}/history?execution.runId=${runs[0]!.runId}`);
  expect(res.status).toBe(200);
  const body = (await res.json()) as { history?: { events?: { activityTaskScheduledEventAttributes?: { activityType?: { name?: string } } }[] } };
  const uiSteps = (body.history?.events ?? []).map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name).filter(Boolean);
  expect(uiSteps).toEqual(steps);
}
