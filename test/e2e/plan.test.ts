// e2e `plan`: queenmq.com/plan and queenmq.com/plan-only. A plan says the operation the spec would
// start and its steps, and changes nothing (plan-only starts nothing while it is set); the run that
// follows once plan-only goes takes exactly the planned steps, as its Events show: an upgrade (with
// a canary), a scale-up from 3 to 5 voters, and a replacement.
import type { CoreV1Event } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import type { PlanStatus } from '../../crd/schema.ts';
import { annotate, clusterEvents, formed, getCluster, patchSpec, pods, scenario, seedSpec, sleep, waitForCluster, type Scenario } from './harness.ts';
import { workflowRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

/**
 * The step Events of a run since `seen` (each Event's count then), in the order its steps ran: each
 * occurrence of a step's Event carries the step (`<run id>/<activity id>`, in the queenmq.com/step
 * annotation), and a run's activity ids count up.
 */
const STEP_REASONS = ['UpdateTemplate', 'RestartPod', 'Canary', 'ScalePods', 'AddLearner', 'Promote', 'RemoveMember', 'DeleteClaim', 'ReplaceStarted', 'WipeVolume', 'ReplaceFinished'];
async function stepsSince(sc: Scenario, seen: Map<string, number>): Promise<string[]> {
  const steps: { message: string; activity: number }[] = [];
  for (const e of (await clusterEvents(sc)).filter((x) => STEP_REASONS.includes(x.reason ?? ''))) {
    const fresh = (e.count ?? 1) - (seen.get(e.metadata!.name!) ?? 0);
    const keys = (e.metadata?.annotations?.['queenmq.com/step'] ?? '').split(' ').filter(Boolean);
    for (const key of keys.slice(Math.max(0, keys.length - fresh))) steps.push({ message: e.message!, activity: Number(key.split('/').at(-1)) });
  }
  return steps.sort((a, b) => a.activity - b.activity).map((x) => x.message);
}
const eventCounts = async (sc: Scenario) => new Map((await clusterEvents(sc)).map((e: CoreV1Event) => [e.metadata!.name!, e.count ?? 1]));
const uids = async (sc: Scenario) => (await pods(sc)).map((p) => `${p.metadata!.name}=${p.metadata!.uid}`).sort();

/** With plan-only set, the spec change is planned and nothing starts; returns the plan. */
async function planned(sc: Scenario, operation: string, change: () => Promise<void>): Promise<PlanStatus> {
  const before = await uids(sc);
  const runs = (await workflowRuns(sc, `queencluster/${sc.ns}/queen`)).length;
  await annotate(sc, { 'queenmq.com/plan-only': 'true' });
  await change();
  const qc = await waitForCluster(sc, `a plan of ${operation}`, (q) => q.status?.plan?.operation === operation && q.status.plan.generation === q.metadata.generation, 60_000);
  const plan = qc.status!.plan!;
  console.log(`plan: ${plan.message}\n  ${plan.steps!.map((x) => `${x.step} [${(x.gates ?? []).join(', ')}]${x.note ? ` (${x.note})` : ''}`).join('\n  ')}`);
  expect(plan.message).toContain(`; it waits: plan only (queenmq.com/plan-only): ${operation} (${plan.target}) would start; its steps are in status.plan`);
  // Nothing moves while plan-only holds it.
  await sleep(6000);
  expect(await uids(sc)).toEqual(before);
  expect((await workflowRuns(sc, `queencluster/${sc.ns}/queen`)).length).toBe(runs);
  const now = await getCluster(sc);
  expect(now.status?.operation ?? null).toBeNull();
  // (A spec that asks for voters that have no pod yet reads Degraded, "pod 3 is not running", plan-only or not.)
  if (operation !== 'ScaleVoters') expect(now.status?.message).toBe(`plan only (queenmq.com/plan-only): ${operation} (${plan.target}) would start; its steps are in status.plan`);
  return plan;
}

it('plan: plans of an upgrade, a scale-up and a replacement are the steps their runs take', async () => {
  s = await scenario('plan');
  const sc = s;
  await formed(sc, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { canarySeconds: 5 } });

  // At rest: no operation.
  await annotate(sc, { 'queenmq.com/plan': 'true' });
  const rest = await waitForCluster(sc, 'a plan at rest', (q) => !!q.status?.plan, 30_000);
  expect(rest.status!.plan).toMatchObject({ message: 'the cluster is as specified: no operation would start', steps: [] });
  expect(rest.status!.plan!.operation ?? null).toBeNull();
  await annotate(sc, { 'queenmq.com/plan': null });
  await waitForCluster(sc, 'the plan removed', (q) => !q.status?.plan, 30_000);

  // An upgrade.
  let seen = await eventCounts(sc);
  const upgrade = await planned(sc, 'RollingUpgrade', () => patchSpec(sc, { version: '2.6.1' }));
  expect(upgrade.target).toBe('2.6.1');
  const leader = (await getCluster(sc)).status!.leader! - 1;
  // The leader last; and, 2.6.1 not having run here, what the raise after it could close.
  expect(upgrade.steps!.at(-1)).toMatchObject({
    step: `restarting pod ${leader}`,
    note:
      'the leader, last; 2.6.1 has not run here: if its build reads more than catalogue version 6, the leader raises the cluster to it once every pod runs 2.6.1, ' +
      'and 2.6.0 cannot start on it after that (spec.upgrade.finalize: Manual keeps the way back open)',
  });
  expect(upgrade.steps!.find((x) => x.step.startsWith('soaking'))?.gates).toEqual(['canary-soaked']);
  await annotate(sc, { 'queenmq.com/plan-only': null });
  await waitForCluster(sc, 'the plan removed', (q) => !q.status?.plan, 30_000);
  await waitForCluster(sc, 'the upgrade done', (q) => q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded' && q.status.phase === 'Ready', 300_000);
  expect(await stepsSince(sc, seen)).toEqual(upgrade.steps!.map((x) => x.step));

  // 3 to 5 voters.
  seen = await eventCounts(sc);
  const scale = await planned(sc, 'ScaleVoters', () => patchSpec(sc, { replicas: 5 }));
  expect(scale.steps!.map((x) => x.step)).toEqual(['adding pods for 5 voters', 'adding node 4 as a learner', 'adding node 5 as a learner', 'promoting nodes 4 and 5 to voters']);
  await annotate(sc, { 'queenmq.com/plan-only': null });
  await waitForCluster(sc, '5 voters', (q) => JSON.stringify(q.status?.voters) === '[1,2,3,4,5]' && q.status?.lastOperation?.type === 'ScaleVoters' && q.status.phase === 'Ready', 300_000);
  expect(await stepsSince(sc, seen)).toEqual(scale.steps!.map((x) => x.step));

  // A replacement, of the leader's pod: the plan says its hand-off first.
  seen = await eventCounts(sc);
  const lead = (await getCluster(sc)).status!.leader! - 1;
  const replace = await planned(sc, 'ReplaceNode', () => annotate(sc, { 'queenmq.com/replace-pod': `queen-${lead}` }));
  expect(replace.steps![1]).toMatchObject({ step: `pod ${lead} leads: stopping it once so it hands leadership away before it is removed`, note: 'it leads' });
  await annotate(sc, { 'queenmq.com/plan-only': null });
  await waitForCluster(sc, 'the replacement done', (q) => q.status?.lastOperation?.type === 'ReplaceNode' && q.status.lastOperation.result === 'Succeeded' && q.status.phase === 'Ready', 300_000);
  expect(await stepsSince(sc, seen)).toEqual(replace.steps!.map((x) => x.step));
});
