// e2e `stale-voter-leader-change` (issue 12, item 4): the stale-voter diagnosis under both things
// a new leader may know of the followers' progress (QUEEN_SIM_LEADER_PROGRESS). A follower's
// volume is wiped behind the operator's back: Degraded "has to be replaced" in both. Then the
// leader's process is killed and held down until another node leads. A leader that carries the progress over
// keeps the wiped voter stale, and the cluster stays Degraded with that message; a leader that
// knows nothing until the followers answer backs off to what the wiped voter holds and repairs
// it, and the cluster is Ready again (a node that is being repaired is never called stale).
import { afterEach, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { formed, getCluster, monitor, REALISTIC_SIM, scenario, seedSpec, sleep, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const STALE = /^node (\d) is behind the leader and does not catch up \((\d+) (entry|entries) behind\): if its volume was wiped or put back from a copy, it has to be replaced$/;

it.each(['carry', 'unknown'] as const)('stale-voter with QUEEN_SIM_LEADER_PROGRESS=%s: diagnosed, then across a leader change', async (mode) => {
  s = await scenario(`stale${mode}`, { sim: { ...REALISTIC_SIM, QUEEN_SIM_LEADER_PROGRESS: mode } });
  await s.install({ stallAfter: '5s', probeInterval: '5s' });
  const qc = await formed(s, seedSpec());
  const leader = qc.status!.leader!;
  const follower = [1, 2, 3].find((id) => id !== leader)!;
  await control.wipe(s.ns, `queen-${follower - 1}`);
  const degraded = await waitForCluster(s, 'the stale voter reported', (q) => q.status?.phase === 'Degraded' && STALE.test(q.status?.message ?? ''), 120_000);
  expect(STALE.exec(degraded.status!.message!)![1]).toBe(String(follower));

  // The leader's process dies and stays down until another node leads (started again at once, it
  // may win the election itself: its log is as long as the other follower's); then its pod
  // restarts in place.
  const watch = await monitor(s);
  await control.kill(s.ns, `queen-${leader - 1}`, { signal: 'SIGKILL', hold: true });
  await waitForCluster(s, 'another leader', (q) => q.status?.leader != null && q.status.leader !== leader && (q.status.term ?? 0) > (qc.status?.term ?? 0), 120_000);
  await control.release(s.ns, `queen-${leader - 1}`);
  if (mode === 'carry') {
    await waitForCluster(s, 'still stale', (q) => q.status?.phase === 'Degraded' && STALE.test(q.status?.message ?? ''), 120_000);
    const until = Date.now() + 20_000;
    while (Date.now() < until) {
      const now = await getCluster(s);
      expect(now.status?.phase).toBe('Degraded');
      expect(STALE.exec(now.status?.message ?? '')?.[1]).toBe(String(follower));
      await sleep(500);
    }
  } else {
    const ready = await waitForCluster(s, 'Ready: the wiped voter repaired by the new leader', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 240_000);
    expect(ready.status?.members?.find((m) => m.nodeId === follower)).toMatchObject({ voter: true, live: true, lag: 0 });
  }
  await watch.stop();
  // Whatever the mode, no other node was ever called stale.
  const named = watch.messages.map((m) => STALE.exec(m)?.[1]).filter((x): x is string => !!x);
  expect([...new Set(named)]).toEqual([String(follower)]);
  console.log(`stale-voter ${mode}:\n  ${watch.timeline.join('\n  ')}`);
});
