// e2e `upgrade-canary`: spec.upgrade.canarySeconds. The first pod on the new version soaks, watched
// (Ready, live, caught up, a write committing through it), before the next pod moves; the status
// names the gate `canary-soaked` and the time left. A canary that passes lets the upgrade go on; one
// that fails in its window (a build that crashes once it runs) holds the upgrade (onFailure Hold),
// and rolls it back once onFailure is Rollback.
import { afterEach, expect, it } from 'vitest';
import { clusterEvents, formed, getCluster, monitor, patchSpec, scenario, seedSpec, sleep, waitForCluster, type Scenario } from './harness.ts';
import { recordHistory, settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

/** The first pod an upgrade moves: the highest ordinal that does not lead. */
const firstMoved = (leader: number) => [2, 1, 0].find((o) => o !== leader - 1)!;
const at = (e: { firstTimestamp?: Date | string; eventTime?: Date | string }) => new Date((e.firstTimestamp ?? e.eventTime ?? 0) as Date).getTime();

it('upgrade-canary: the first pod soaks, watched, before the next one moves; the upgrade then goes on', async () => {
  s = await scenario('canary');
  const sc = s;
  const before = await formed(sc, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { canarySeconds: 20 } });
  const first = firstMoved(before.status!.leader!);
  const watch = await monitor(sc);
  await patchSpec(sc, { version: '2.6.1' });
  const soaking = await waitForCluster(sc, 'the canary soaking', (q) => q.status?.operation?.gate === 'canary-soaked' && /left$/.test(q.status?.message ?? ''), 180_000);
  expect(soaking.status!.message).toMatch(new RegExp(`^pod ${first} is the canary on 2\\.6\\.1: checking that it stays Ready, live and caught up and commits writes; \\d+s left$`));
  expect(soaking.status!.phase).toBe('Upgrading');
  await waitForCluster(sc, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 300_000);
  await watch.stop();
  console.log(`canary:\n  ${watch.timeline.join('\n  ')}`);

  // The time left counted down in the status.
  const left = watch.messages.filter((m) => m.startsWith(`pod ${first} is the canary on 2.6.1`)).map((m) => Number(/(\d+)s left$/.exec(m)?.[1]));
  expect(left.length).toBeGreaterThanOrEqual(3);
  expect([...left].sort((a, b) => b - a)).toEqual(left);
  // The soak came between the first restart and the next one, and lasted its 20 s.
  const events = (await clusterEvents(sc)).filter((e) => ['RestartPod', 'Canary', 'CanaryPassed'].includes(e.reason ?? ''));
  expect(events.map((e) => e.message)).toEqual([
    `restarting pod ${first}`,
    `soaking pod ${first} on 2.6.1 for 20s`,
    `pod ${first} ran 2.6.1 for 20s: Ready, live, caught up, committing writes`,
    expect.stringMatching(/^restarting pod \d$/),
    expect.stringMatching(/^restarting pod \d$/),
  ]);
  expect(at(events[3]!) - at(events[1]!)).toBeGreaterThanOrEqual(19_000);
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`)).toHaveLength(2);
  const runs = (await settledRuns(sc, `queencluster/${sc.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade');
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  await recordHistory(sc, runs[0]!, 'rollingUpgrade-canary');
});

it('upgrade-canary-fails: a canary that fails in its window holds the upgrade, and rolls it back once asked', async () => {
  s = await scenario('canaryfail');
  const sc = s;
  const before = await formed(sc, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { canarySeconds: 60 } });
  const first = firstMoved(before.status!.leader!);
  const watch = await monitor(sc);
  // It serves, passes its readiness, then crashes 10 s later: inside the canary's window.
  await patchSpec(sc, { version: '2.6.1-crashafter10' });
  const held = await waitForCluster(sc, 'the upgrade held', (q) => q.status?.operation?.gate === 'new-version-healthy', 180_000);
  expect(held.status!.phase).toBe('Blocked');
  expect(held.status!.message).toMatch(
    new RegExp(
      `^the upgrade to 2\\.6\\.1-crashafter10 holds: the canary failed: pod ${first} (restarted: its container exited with code 1 \\(\\d+ restarts?\\)|is not Ready|is not running)` +
        `; set spec.upgrade.onFailure to Rollback to roll it back, or change spec.version, or try it again: kubectl -n ${sc.ns} annotate queencluster queen queenmq.com/retry=\\$\\(date \\+%s\\) --overwrite$`,
    ),
  );
  expect(held.status!.operation?.type).toBe('RollingUpgrade');
  // It holds: no other pod moves.
  await sleep(8000);
  const restarts = async () => (await clusterEvents(sc)).filter((e) => e.reason === 'RestartPod').map((e) => e.message);
  expect(await restarts()).toEqual([`restarting pod ${first}`]);
  expect((await getCluster(sc)).status?.operation?.gate).toBe('new-version-healthy');

  await patchSpec(sc, { upgrade: { canarySeconds: 60, onFailure: 'Rollback' } });
  const rolled = await waitForCluster(sc, 'the upgrade rolled back', (q) => q.status?.lastOperation?.result === 'RolledBack' && q.status?.version === '2.6.0', 180_000);
  await watch.stop();
  console.log(`canary-fails:\n  ${watch.timeline.join('\n  ')}`);
  expect(rolled.status!.lastOperation!.message).toMatch(new RegExp(`^rolled back to 2\\.6\\.0: the upgrade to 2\\.6\\.1-crashafter10 failed: the canary failed: pod ${first} `));
  expect(await restarts()).toEqual([`restarting pod ${first}`, `rolling back pod ${first} to 2.6.0`]);
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`)!.length).toBeLessThanOrEqual(o === first ? 3 : 1);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
});
