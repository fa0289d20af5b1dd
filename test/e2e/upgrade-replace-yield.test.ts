// e2e `upgrade-replace-yield`: an upgrade waits on a voter that does not catch up (its volume was
// wiped); the person asks for that pod to be replaced. The upgrade yields at its next safe point,
// the replacement runs, and the upgrade starts again and finishes (DESIGN.md section 3, Yield).
import { afterAll, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { annotate, clusterEvents, formed, patchSpec, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('upgrade-replace-yield: the upgrade yields to the replacement of the stale voter', async () => {
  s = await scenario('repyield');
  await s.install({ stallAfter: '5s', probeInterval: '5s' });
  const qc = await formed(s, seedSpec());
  const follower = [1, 2, 3].find((id) => id !== qc.status?.leader)!;
  await control.wipe(s.ns, `queen-${follower - 1}`);
  await waitForCluster(s, 'the stale voter reported', (q) => /has to be replaced$/.test(q.status?.message ?? ''), 120_000);
  await patchSpec(s, { version: '2.6.1' });
  await waitForCluster(s, 'the upgrade held', (q) => q.status?.phase === 'Upgrading' && /does not catch up/.test(q.status?.message ?? ''), 120_000);
  await annotate(s, { 'queenmq.com/replace-pod': `queen-${follower - 1}` });
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'RollingUpgrade', 600_000);
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([
    ['formCluster', 'COMPLETED'],
    ['rollingUpgrade', 'COMPLETED'],
    ['replaceNode', 'COMPLETED'],
    ['rollingUpgrade', 'COMPLETED'],
  ]);
  const yielded = await s.temporal.workflow.getHandle(runs[1]!.workflowId, runs[1]!.runId).result();
  expect(yielded).toMatch(/^the upgrade to 2\.6\.1 yielded to ReplaceNode after no restart/);
  const events = await clusterEvents(s);
  const reasons = events.map((e) => e.reason);
  expect(reasons.indexOf('ReplaceFinished')).toBeLessThan(reasons.indexOf('RestartPod'));
  // The replaced pod came back from the template the upgrade had applied: only the two others restart.
  expect(events.filter((e) => e.reason === 'RestartPod').map((e) => e.message).sort()).toEqual(
    [0, 1, 2].filter((o) => o !== follower - 1).map((o) => `restarting pod ${o}`),
  );
});
