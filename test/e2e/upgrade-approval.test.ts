// e2e `upgrade-approval`: spec.upgrade.approval Manual. The upgrade restarts every pod that does
// not lead, then holds before the leader on the named gate `approved`, saying the command that
// approves it; VERSION shows the two versions meanwhile, Progressing is True and observedGeneration
// stays behind. The wait for the approval is the workflow's: no step runs while it waits (no
// worker slot held). An approval of another version does nothing; the right one lets the leader
// go last, and is spent: the next upgrade, to the same version, asks again. The waits' results in
// the Temporal history say which gates held them and how long, and where it parked for a person.
import { afterAll, expect, it } from 'vitest';
import { annotate, clusterEvents, formed, getCluster, operatorMetricSum, patchSpec, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { activityResults, pendingSteps, settledRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('upgrade-approval: holds before the leader until the version is approved', async () => {
  s = await scenario('approval');
  const before = await formed(s, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { approval: 'Manual' } });
  const leaderPod = before.status!.leader! - 1;
  const generation = before.metadata.generation!;
  expect(before.status?.observedGeneration).toBe(generation);
  await patchSpec(s, { version: '2.6.1' });
  const command = `kubectl -n ${s.ns} annotate queencluster queen queenmq.com/approve=2.6.1`;
  // (VERSION is the observer's, a moment after the restarted pod answers.)
  const held = await waitForCluster(s, 'held before the leader', (q) => q.status?.operation?.gate === 'approved' && q.status?.version === '2.6.0→2.6.1 (2/3)', 180_000);
  expect(held.status?.message).toBe(`waiting for approval to restart the leader (pod ${leaderPod}): ${command}`);
  expect(held.status?.observedGeneration).toBe(generation);
  expect(held.metadata.generation).toBe(generation + 1);
  const cond = (t: string) => held.status?.conditions?.find((c) => c.type === t);
  expect(cond('Progressing')).toMatchObject({ status: 'True', reason: 'RollingUpgrade' });
  expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'Upgrading' });
  const restarted = (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => e.message);
  expect(restarted.sort()).toEqual([0, 1, 2].filter((o) => o !== leaderPod).map((o) => `restarting pod ${o}`).sort());
  // It waits for a person in the workflow: parked, and no step of it runs.
  expect(held.status?.operation?.parked).toMatchObject({ lift: 'person' });
  await waitFor('no step running while it waits', async () => (await pendingSteps(s, `queencluster/${s.ns}/queen`)).length === 0 || undefined, 10_000);
  // The replica's worker says it too: no activity slot in use, and the wait for a person is a gauge of its own.
  await waitFor('no activity slot in use while it waits', async () => (await operatorMetricSum(s, 'temporal_worker_task_slots_used', { worker_type: 'ActivityWorker' })) === 0 || undefined, 15_000);
  const since = await operatorMetricSum(s, 'queen_operation_waiting_for_person_since_seconds', { namespace: s.ns, name: 'queen', type: 'RollingUpgrade', gate: 'approved' });
  expect(Math.round(since * 1000)).toBe(Date.parse(held.status!.operation!.parked!.since));

  // Another version does nothing.
  await annotate(s, { 'queenmq.com/approve': '2.6.0' });
  await sleep(5000);
  expect((await getCluster(s)).status?.operation?.gate).toBe('approved');

  await annotate(s, { 'queenmq.com/approve': '2.6.1' });
  const after = await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 180_000);
  const events = (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => e.message);
  expect(events.at(-1)).toBe(`restarting pod ${leaderPod}`);
  expect(events).toHaveLength(3);
  await waitForCluster(s, 'observedGeneration caught up', (q) => q.status?.observedGeneration === generation + 1, 30_000);
  expect(after.status?.conditions?.find((c) => c.type === 'Progressing')).toMatchObject({ status: 'False' });

  // The wait that held for the approval says so in its result, as the Web UI shows it.
  const run = (await settledRuns(s, `queencluster/${s.ns}/queen`)).find((r) => r.type === 'rollingUpgrade')!;
  const results = (await activityResults(s, run)).filter((a) => a.type === 'awaitNextRestart').map((a) => a.result as { held?: string; parked?: { gate: string; lift: string } });
  // Parked at the approval (again after each change of the cluster: the approval of another version, a pod that became Ready).
  const parked = results.filter((r) => r.parked).map((r) => r.parked!);
  expect(parked.length).toBeGreaterThanOrEqual(2);
  for (const p of parked) expect(p).toMatchObject({ gate: 'approved', lift: 'person' });
  expect(results.some((r) => /pod-ready-for-min-ready-seconds \d+(\.\d)? s/.test(r.held ?? ''))).toBe(true);

  // The approval was spent by that upgrade: the next one, to the same version (a change of the pod
  // template only), waits for an approval of its own.
  expect((await getCluster(s)).metadata.annotations?.['queenmq.com/approve']).toBeUndefined();
  await patchSpec(s, { env: [{ name: 'QUEEN_EXAMPLE_SETTING', value: '1' }] });
  const again = await waitForCluster(s, 'held before the leader again', (q) => q.status?.operation?.gate === 'approved', 180_000);
  expect(again.status?.message).toBe(`waiting for approval to restart the leader (pod ${again.status!.leader! - 1}): ${command}`);
  await annotate(s, { 'queenmq.com/approve': '2.6.1' });
  await waitForCluster(s, 'the template change rolled out', (q) => q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded' && q.status?.lastOperation?.runId !== after.status?.lastOperation?.runId, 180_000);
});
