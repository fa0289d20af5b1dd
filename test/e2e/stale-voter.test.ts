// e2e `stale-voter`: a follower's volume wiped behind the operator's back. The node comes back
// empty under its id and never catches up; the cluster is Degraded with the message of seed 000,
// and it stays so across a restart of the operator (its pod deleted, the Deployment makes another).
import { afterAll, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { formed, getCluster, kubectl, scenario, seedSpec, sleep, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario;
afterAll(() => s?.close());

const STALE = /^node (\d) is behind the leader and does not catch up \((\d+) (entry|entries) behind\): if its volume was wiped or put back from a copy, it has to be replaced$/;

it('stale-voter: Degraded "has to be replaced", across an operator restart', async () => {
  s = await scenario('stale');
  const op = await s.install({ stallAfter: '5s', probeInterval: '5s' });
  const qc = await formed(s, seedSpec());
  const follower = [1, 2, 3].find((id) => id !== qc.status?.leader)!;
  await control.wipe(s.ns, `queen-${follower - 1}`);

  const degraded = await waitForCluster(s, 'the stale voter reported', (q) => q.status?.phase === 'Degraded' && STALE.test(q.status?.message ?? ''), 120_000);
  expect(STALE.exec(degraded.status!.message!)![1]).toBe(String(follower));
  const member = degraded.status?.members?.find((m) => m.nodeId === follower);
  expect(member?.behindSince).toBeTruthy();

  const [first] = await op.pods(s.core);
  await kubectl(['-n', s.ns, 'delete', 'pod', first!.metadata!.name!, '--grace-period=0', '--force']);
  // Through the restart and after it, the cluster never looks Ready.
  const until = Date.now() + 20_000;
  while (Date.now() < until) {
    const now = await getCluster(s);
    expect(now.status?.phase).toBe('Degraded');
    expect(now.status?.message).toMatch(STALE);
    await sleep(500);
  }
  await op.ready(s.core, 1);
  const after = await getCluster(s);
  expect(after.status?.members?.find((m) => m.nodeId === follower)?.behindSince).toBe(member?.behindSince);
});
