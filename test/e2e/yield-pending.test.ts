// e2e `yield-pending` (issue 8, item 6): a yield asked for while a step that must finish runs is
// said in status at once. An upgrade restarts a pod through the Eviction API; the team adds a
// disruption budget of its own over the cluster's pods, beside the operator's, and the Eviction
// API refuses every pod that two budgets select (it answers 500, whatever the budgets allow), so
// that step waits at `disruption-budget` and says which budget to delete. The person asks for
// another voter's pod to be replaced: the upgrade cannot stop in the middle of a pod's restart,
// and status says that it yields to the replacement once the step is done. Once the team's budget
// is deleted, the pod restarts, the upgrade yields, the replacement runs, and the upgrade starts
// again and finishes.
import { afterAll, expect, it } from 'vitest';
import { PolicyV1Api } from '@kubernetes/client-node';
import { annotate, formed, patchSpec, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('yield-pending: a yield asked for during a pod restart that waits is said in status, then honoured', async () => {
  s = await scenario('yieldpend');
  await s.install();
  const qc = await formed(s, seedSpec({ minReadySeconds: 2 }));
  const policy = s.kc.makeApiClient(PolicyV1Api);
  await policy.createNamespacedPodDisruptionBudget({
    namespace: s.ns,
    body: { metadata: { name: 'no-evictions' }, spec: { maxUnavailable: 0, selector: { matchLabels: { 'app.kubernetes.io/instance': 'queen' } } } },
  });
  await patchSpec(s, { version: '2.6.1' });
  const held = await waitForCluster(s, 'the restart held by the budget', (q) => q.status?.operation?.gate === 'disruption-budget', 120_000);
  const restarting = Number(/^restarting pod (\d)/.exec(held.status?.message ?? '')?.[1]);
  const sharedBudget = /^restarting pod \d: the Eviction API refuses pods that more than one PodDisruptionBudget selects \(no-evictions and queen\); delete the budget no-evictions \(the operator keeps queen: at most one pod of the cluster down\)/;
  expect(held.status?.message).toMatch(sharedBudget);
  // Another voter's pod, not the leader's.
  const other = [0, 1, 2].find((o) => o !== restarting && o !== qc.status!.leader! - 1)!;
  await annotate(s, { 'queenmq.com/replace-pod': `queen-${other}` });
  const said = await waitForCluster(s, 'the yield said', (q) => /; then it yields to ReplaceNode \(the step that runs is not stopped in its middle\)$/.test(q.status?.message ?? ''), 60_000);
  expect(said.status?.message).toMatch(sharedBudget);
  expect(said.status?.message).toMatch(new RegExp(`^restarting pod ${restarting}: `));
  expect(said.status?.operation?.type).toBe('RollingUpgrade');

  // The step's hold changes (a second budget of the team's): its new line still says the yield it owes.
  await policy.createNamespacedPodDisruptionBudget({
    namespace: s.ns,
    body: { metadata: { name: 'no-evictions-too' }, spec: { maxUnavailable: 0, selector: { matchLabels: { 'app.kubernetes.io/instance': 'queen' } } } },
  });
  const changed = await waitForCluster(s, 'the new hold said with the yield', (q) => /\(no-evictions, no-evictions-too and queen\)/.test(q.status?.message ?? ''), 60_000);
  expect(changed.status?.message).toMatch(
    new RegExp(
      `^restarting pod ${restarting}: the Eviction API refuses pods that more than one PodDisruptionBudget selects \\(no-evictions, no-evictions-too and queen\\); delete the budgets that are not the cluster's \\(the operator keeps queen: at most one pod of the cluster down\\); then it yields to ReplaceNode \\(the step that runs is not stopped in its middle\\)$`,
    ),
  );
  expect(changed.status?.operation?.yieldTo).toBe('ReplaceNode');

  await policy.deleteNamespacedPodDisruptionBudget({ namespace: s.ns, name: 'no-evictions-too' });
  await policy.deleteNamespacedPodDisruptionBudget({ namespace: s.ns, name: 'no-evictions' });
  await waitForCluster(
    s,
    'every pod on 2.6.1 after the replacement',
    (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded',
    600_000,
  );
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([
    ['formCluster', 'COMPLETED'],
    ['rollingUpgrade', 'COMPLETED'],
    ['replaceNode', 'COMPLETED'],
    ['rollingUpgrade', 'COMPLETED'],
  ]);
  const yielded = await s.temporal.workflow.getHandle(runs[1]!.workflowId, runs[1]!.runId).result();
  expect(yielded).toMatch(new RegExp(`^the upgrade to 2\\.6\\.1 yielded to ReplaceNode after restarting pod ${restarting}`));
});
