// e2e `plan`: queenmq.com/plan and queenmq.com/plan-only. A plan says the operation the spec would
// start and its steps, and changes nothing (plan-only starts nothing while it is set); the run that
// follows once plan-only goes takes exactly the planned steps, as its Events show, and each step
// was held only by gates its plan names, as the `held` of its activities' results in the Temporal
// history show: an upgrade (with a canary and an approval before the leader), a scale-up from 3 to
// 5 voters, and a replacement of the leader's pod.
import type { CoreV1Event } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import type { PlanStatus } from '../../crd/schema.ts';
import { annotate, clusterEvents, formed, getCluster, patchSpec, pods, scenario, seedSpec, sleep, waitForCluster, type Scenario } from './harness.ts';
import { heldSteps, settledRuns, workflowRuns } from './temporal.ts';

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

/**
 * The gates that held the last run's steps and that its plan does not name. Each activity belongs to
 * the plan step whose line is its summary; a wait (a summary of its own) to the step it comes before,
 * and what runs after the last of them to that one. Returns the gates seen, to show that some held.
 */
async function heldOutsidePlan(sc: Scenario, plan: PlanStatus): Promise<{ outside: string[]; seen: string[] }> {
  const run = (await settledRuns(sc, `queencluster/${sc.ns}/queen`)).at(-1)!;
  const steps = plan.steps ?? [];
  const outside: string[] = [];
  const seen: string[] = [];
  let last = -1;
  let pending: Awaited<ReturnType<typeof heldSteps>> = [];
  const check = (acts: typeof pending, step: (typeof steps)[number]) => {
    for (const a of acts) {
      for (const gate of a.held) {
        seen.push(`${step.step}: ${gate}`);
        if (!(step.gates ?? []).includes(gate as never)) outside.push(`"${a.summary}" (${a.type}) was held by ${gate}, which the plan of "${step.step}" does not name`);
      }
    }
  };
  // (A step may run before its plan's place says: a leader's replacement first asks it to leave,
  // hears that it leads, and stops it once before it asks again.)
  for (const a of await heldSteps(sc, run)) {
    const at = steps.findIndex((x) => x.step === a.summary);
    pending.push(a);
    if (at < 0) continue;
    check(pending, steps[at]!);
    pending = [];
    last = at;
  }
  if (last < 0) outside.push(`no activity of run ${run.runId} carried a planned step's line`);
  else check(pending, steps[last]!);
  console.log(`held, by planned step:\n  ${seen.join('\n  ') || 'nothing'}`);
  return { outside, seen };
}

it('plan: plans of an upgrade, a scale-up and a replacement are the steps their runs take, held only by their gates', async () => {
  s = await scenario('plan');
  const sc = s;
  await formed(sc, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { canarySeconds: 5, approval: 'Manual' } });

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
  // The leader's restart waits for the approval; every restart for the stop gate, its drain and the eviction.
  expect(upgrade.steps!.at(-1)!.gates).toEqual(expect.arrayContaining(['approved', 'pod-ready-for-min-ready-seconds', 'write-commits', 'pod-out-of-endpoints', 'requests-drained', 'disruption-budget']));
  expect(upgrade.steps!.find((x) => x.step.startsWith('soaking'))?.gates).toEqual(['canary-soaked', 'new-version-healthy']);
  await annotate(sc, { 'queenmq.com/plan-only': null });
  await waitForCluster(sc, 'the plan removed', (q) => !q.status?.plan, 30_000);
  await waitForCluster(sc, 'the upgrade waiting for approval', (q) => q.status?.operation?.gate === 'approved', 300_000);
  await annotate(sc, { 'queenmq.com/approve': '2.6.1' });
  await waitForCluster(sc, 'the upgrade done', (q) => q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded' && q.status.phase === 'Ready', 300_000);
  expect(await stepsSince(sc, seen)).toEqual(upgrade.steps!.map((x) => x.step));
  const upgradeHeld = await heldOutsidePlan(sc, upgrade);
  expect(upgradeHeld.outside).toEqual([]);
  // The first pod was drained before it stopped, and soaked on the new version.
  const [first, soak] = [upgrade.steps![1]!.step, upgrade.steps![2]!.step];
  expect(upgradeHeld.seen).toEqual(expect.arrayContaining([`${first}: requests-drained`, `${soak}: canary-soaked`]));

  // 3 to 5 voters.
  seen = await eventCounts(sc);
  const scale = await planned(sc, 'ScaleVoters', () => patchSpec(sc, { replicas: 5 }));
  expect(scale.steps!.map((x) => x.step)).toEqual(['adding pods for 5 voters', 'adding node 4 as a learner', 'adding node 5 as a learner', 'promoting nodes 4 and 5 to voters']);
  await annotate(sc, { 'queenmq.com/plan-only': null });
  await waitForCluster(sc, '5 voters', (q) => JSON.stringify(q.status?.voters) === '[1,2,3,4,5]' && q.status?.lastOperation?.type === 'ScaleVoters' && q.status.phase === 'Ready', 300_000);
  expect(await stepsSince(sc, seen)).toEqual(scale.steps!.map((x) => x.step));
  const scaleHeld = await heldOutsidePlan(sc, scale);
  expect(scaleHeld.outside).toEqual([]);
  // The first learner waited for its pod to start.
  expect(scaleHeld.seen).toEqual(expect.arrayContaining(['adding node 4 as a learner: pod-running']));

  // A replacement, of the leader's pod: the plan says its hand-off first.
  seen = await eventCounts(sc);
  const lead = (await getCluster(sc)).status!.leader! - 1;
  const replace = await planned(sc, 'ReplaceNode', () => annotate(sc, { 'queenmq.com/replace-pod': `queen-${lead}` }));
  expect(replace.steps![1]).toMatchObject({ step: `pod ${lead} leads: stopping it once so it hands leadership away before it is removed`, note: 'it leads' });
  await annotate(sc, { 'queenmq.com/plan-only': null });
  await waitForCluster(sc, 'the replacement done', (q) => q.status?.lastOperation?.type === 'ReplaceNode' && q.status.lastOperation.result === 'Succeeded' && q.status.phase === 'Ready', 300_000);
  expect(await stepsSince(sc, seen)).toEqual(replace.steps!.map((x) => x.step));
  const replaceHeld = await heldOutsidePlan(sc, replace);
  expect(replaceHeld.outside).toEqual([]);
  // The leader's pod was drained before its hand-off; the old volume went before the node came back.
  expect(replaceHeld.seen).toEqual(expect.arrayContaining([`${replace.steps![1]!.step}: requests-drained`, `deleting the volume of pod ${lead}: old-volume-gone`]));
});
