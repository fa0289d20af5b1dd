// e2e `joint-left` (issue 8, item 5): a voter change left half done. The voters go from 3 to 5;
// the leader is told (the simulator's /_sim/fault) to die right after the joint configuration of
// the promotion commits, before the final one: the new leader finds the joint configuration in
// effect and every change but one is refused (in_flight). The broker contract says how to finish
// it (PUT voters with the joint's last set): the operator does, says so in an Event, and the scale
// goes on to five voters. While the cluster is paused it is not finished but said (an Event, and
// Degraded once no operation runs), and finished once the pause is lifted.
import { afterEach, expect, it } from 'vitest';
import { annotate, clusterEvents, formed, patchSpec, pods, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('joint-left: the leader dies between the two steps of a promotion; the operator finishes the change and the scale goes on', async () => {
  s = await scenario('joint');
  const qc = await formed(s, seedSpec());
  const leader = qc.status!.leader!;
  const ip = (await pods(s)).find((p) => p.metadata?.name === `queen-${leader - 1}`)!.status!.podIP!;
  const fault = await fetch(`http://${ip}:6632/_sim/fault`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ crashAfterJoint: true }) });
  expect(await fault.json()).toEqual({ crashAfterJoint: true });

  await patchSpec(s, { replicas: 5 });
  // Paused once the scale runs: its learners are added and promoted (no voter stops), but the
  // change left half done is not finished behind the back of the person who paused: it is said.
  await waitForCluster(s, 'the scale running', (q) => q.status?.operation?.type === 'ScaleVoters', 60_000);
  await annotate(s, { 'queenmq.com/pause': 'true' });
  const held = await waitFor('the unfinished change said', async () => (await clusterEvents(s!)).find((e) => e.reason === 'FinishVoterChange'), 180_000);
  expect([held.type, held.message]).toEqual([
    'Warning',
    'finishing a voter change left half done: voters [1,2,3,4,5]: paused by the queenmq.com/pause annotation (the joint configuration [[1,2,3],[1,2,3,4,5]] was left by a leader that stopped between the two steps); membership changes wait until it is finished',
  ]);
  await sleep(3000);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'FinishVoterChange')).toHaveLength(1);
  await annotate(s, { 'queenmq.com/pause': null });
  const done = await waitForCluster(
    s,
    'five voters',
    (q) => JSON.stringify(q.status?.voters) === '[1,2,3,4,5]' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'ScaleVoters',
    300_000,
  );
  expect(done.status?.lastOperation?.result).toBe('Succeeded');
  const events = await clusterEvents(s);
  // The leader died after the joint configuration committed: its pod restarted once, with 137.
  const crashed = done.status!.members!.find((m) => m.nodeId === leader)!;
  expect(crashed.restarts).toBeGreaterThanOrEqual(1);
  const finished = events.filter((e) => e.reason === 'FinishVoterChange');
  expect(finished.map((e) => [e.type, e.message])).toEqual([
    [held.type, held.message],
    [
      'Warning',
      'finishing a voter change left half done: voters [1,2,3,4,5]: the joint configuration [[1,2,3],[1,2,3,4,5]] was left by a leader that stopped between the two steps',
    ],
  ]);
  const steps = events.filter((e) => ['ScalePods', 'AddLearner', 'Promote', 'FinishVoterChange'].includes(e.reason!)).map((e) => e.reason);
  // The promotion's own step and the observer's Events (the held one before the finished one,
  // above) may come in any order.
  expect(steps.slice(0, 3)).toEqual(['ScalePods', 'AddLearner', 'AddLearner']);
  expect(steps.slice(3).sort()).toEqual(['FinishVoterChange', 'FinishVoterChange', 'Promote']);
});
