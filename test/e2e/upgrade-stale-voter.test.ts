// e2e `upgrade-stale-voter`: a follower's volume wiped behind the operator's back before the
// upgrade. The upgrade stops with the "does not catch up ... has to be replaced" message of seed
// 000 and restarts nothing while that lasts: a rolling update that only read readiness would have
// stopped a second voter here.
import { afterAll, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { clusterEvents, formed, getCluster, monitor, patchSpec, scenario, seedSpec, sleep, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario;
afterAll(() => s?.close());

it('upgrade-stale-voter: nothing restarts while a voter does not catch up', async () => {
  s = await scenario('upstale');
  await s.install({ stallAfter: '5s', probeInterval: '5s' });
  const qc = await formed(s, seedSpec());
  const follower = [1, 2, 3].find((id) => id !== qc.status?.leader)!;
  await control.wipe(s.ns, `queen-${follower - 1}`);
  await waitForCluster(s, 'the stale voter reported', (q) => /does not catch up/.test(q.status?.message ?? ''), 120_000);
  const watch = await monitor(s);
  await patchSpec(s, { version: '2.6.1' });
  const held = await waitForCluster(s, 'the upgrade held back', (q) => q.status?.phase === 'Upgrading' && / is next: node \d is behind the leader and does not catch up/.test(q.status?.message ?? ''), 120_000);
  expect(held.status?.message).toMatch(
    new RegExp(`^pod \\d is next: node ${follower} is behind the leader and does not catch up \\(\\d+ (entry|entries) behind\\): if its volume was wiped or put back from a copy, it has to be replaced$`),
  );
  expect(held.status?.operation).toMatchObject({ type: 'RollingUpgrade', gate: 'voter-not-stalled' });
  await sleep(20_000);
  await watch.stop();
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toEqual([]);
  for (const [, uids] of watch.uids) expect(uids).toHaveLength(1);
  expect((await getCluster(s)).status?.phase).toBe('Upgrading');
});
