// e2e `upgrade-rollback-several` (issue 15, item 1): a rollback that takes back more than one pod.
// With spec.upgrade.approval Manual the upgrade moves every pod that does not lead, then holds
// before the leader; the new version (`-crashafter30`) serves, then crashes 30 s after each start.
// Once a moved pod crash-loops the upgrade rolls back: both moved pods go back to the previous
// version one at a time through the stop gate, the leader (never moved) is not restarted, never two
// voters are down by the operator's hand, and status says RolledBack naming both pods.
import { afterEach, expect, it } from 'vitest';
import { clusterEvents, formed, monitor, patchSpec, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('upgrade-rollback-several: the pods moved before the leader go back one at a time; the leader is not restarted', async () => {
  s = await scenario('rollback2');
  const sc = s;
  const before = await formed(sc, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { onFailure: 'Rollback', approval: 'Manual' } });
  const leader = before.status!.leader!;
  const moved = [0, 1, 2].filter((o) => o !== leader - 1);
  const watch = await monitor(sc);
  await patchSpec(sc, { version: '2.6.1-crashafter30' });
  // Both pods that do not lead run the new version, and the upgrade waits before the leader.
  await waitForCluster(sc, 'the upgrade at the approval gate', (q) => q.status?.operation?.gate === 'approved', 180_000);
  const rolled = await waitForCluster(sc, 'the upgrade rolled back', (q) => q.status?.lastOperation?.result === 'RolledBack', 360_000);
  const settled = await waitForCluster(sc, 'every pod on 2.6.0', (q) => q.status?.version === '2.6.0' && q.status?.phase !== 'Upgrading', 120_000);
  await watch.stop();
  console.log(`rollback-several:\n  ${watch.timeline.join('\n  ')}`);

  const restarts = (await clusterEvents(sc)).filter((e) => e.reason === 'RestartPod').flatMap((e) => Array.from({ length: e.count ?? 1 }, () => e.message!));
  // Each moved pod once forwards, once back; the rollbacks after both moves; the leader never.
  expect(restarts.slice(0, 2).sort()).toEqual(moved.map((o) => `restarting pod ${o}`).sort());
  expect(restarts.slice(2).sort()).toEqual(moved.map((o) => `rolling back pod ${o} to 2.6.0`).sort());
  expect(restarts.some((m) => m.includes(`pod ${leader - 1}`))).toBe(false);
  expect(watch.uids.get(`queen-${leader - 1}`)).toHaveLength(1);
  for (const o of moved) expect(watch.uids.get(`queen-${o}`)!.length).toBeLessThanOrEqual(3);
  const message = rolled.status!.lastOperation!.message!;
  expect(message).toMatch(/^rolled back to 2\.6\.0: the upgrade to 2\.6\.1-crashafter30 failed: pod \d crash-loops on 2\.6\.1-crashafter30: /);
  expect(message.match(/pods (\d) and (\d) went back to 2\.6\.0/)?.slice(1).sort()).toEqual(moved.map(String));
  expect(settled.status?.upgrade?.rollback ?? null).toBeNull();
});
