// e2e `finalize`: spec.upgrade.finalize Manual keeps the way back open through an upgrade (the pods
// run with QUEEN_RAFT_CLUSTER_VERSION_MS=0: the leader does not raise the cluster's catalogue
// version), and the queenmq.com/finalize annotation closes it: one gated rolling restart, named as
// such, after which the leader raises the version, and status says so. Under load, every push is
// acknowledged on its first try and none is lost.
import { afterEach, expect, it } from 'vitest';
import { startLoad } from '../testbed/load.ts';
import { annotate, clusterEvents, expectEveryPushFirstTry, formed, monitor, patchSpec, scenario, seedSpec, sleep, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('finalize: 2.7.0 with finalize Manual stays at catalogue version 6; the annotation restarts each pod once, the leader last, and the leader raises it to 7', async () => {
  s = await scenario('finalize');
  const sc = s;
  await formed(sc, seedSpec());
  await waitForCluster(sc, 'catalogue version 6', (q) => q.status?.clusterVersion === 6, 60_000);
  const load = startLoad({ kubeConfig: sc.kc, namespace: sc.ns, service: 'queen', rate: 50 });
  await patchSpec(sc, { version: '2.7.0', upgrade: { finalize: 'Manual' } });
  const open = '2.7.0, not finalized: the way back to 2.6.0 is open';
  const upgraded = await waitForCluster(sc, 'on 2.7.0, not finalized', (q) => q.status?.version === '2.7.0' && q.status?.phase === 'Ready' && q.status?.message === open, 300_000);
  expect(upgraded.status!.finalization).toBe(open);
  expect(upgraded.status!.clusterVersion).toBe(6);
  const leader = upgraded.status!.leader!;

  // Another version named does nothing.
  await annotate(sc, { 'queenmq.com/finalize': '2.6.0' });
  await sleep(5000);
  const still = await waitForCluster(sc, 'nothing started', (q) => q.status?.phase === 'Ready', 10_000);
  expect(still.status!.lastOperation!.target).toBe('2.7.0');
  expect(still.status!.clusterVersion).toBe(6);

  const watch = await monitor(sc);
  await annotate(sc, { 'queenmq.com/finalize': '2.7.0' });
  const done = await waitForCluster(
    sc,
    'finalized at 7',
    (q) =>
      q.status?.clusterVersion === 7 &&
      q.status?.phase === 'Ready' &&
      q.status?.finalization === '2.7.0, finalized at catalogue version 7: 2.6.0 (reads 6) can no longer start on it' &&
      q.status.message === q.status.finalization,
    300_000,
  );
  await watch.stop();
  console.log(`finalize:\n  ${watch.timeline.join('\n  ')}`);
  expect(done.status!.lastOperation).toMatchObject({ type: 'RollingUpgrade', result: 'Succeeded', target: '2.7.0' });
  // Named as what it is, and one restart per pod, the leader last, through the stop gate.
  const events = await clusterEvents(sc);
  expect(events.find((e) => e.reason === 'Finalize')?.message).toBe(
    "finalizing 2.7.0: a rolling restart, one pod at a time, the leader last, without QUEEN_RAFT_CLUSTER_VERSION_MS=0; the leader then raises the cluster's catalogue version",
  );
  const restarting = watch.messages.filter((m) => /^restarting pod \d$/.test(m));
  expect(restarting).toHaveLength(3);
  expect(restarting.at(-1)).toBe(`restarting pod ${leader - 1}`);
  for (const [name, seen] of watch.uids) expect(seen, name).toHaveLength(2);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  await expectEveryPushFirstTry(sc, load, 'finalize');
});
