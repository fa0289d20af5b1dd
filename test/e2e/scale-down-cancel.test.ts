// e2e `scale-down-cancel`: a scale-down cancelled in its middle, and the data its removed node kept.
// From 5 voters to 3, with the cancel annotation set while node 5's pod is being drained before it
// leaves (--drain-wait 10s keeps the removal in that step long enough for the cancel to land there):
// the step under way finishes (node 5 leaves: a step once begun is not stopped in its middle), then
// the operation ends Cancelled, not Failed, and starts nothing more: node 4 stays a voter, and pod 4
// (node 5's) stays, out of the client Services, on the data node 5 had. The removal gate held no
// further removal after the cancel. When a person then asks for 5 voters again, node 5 does not
// come back with that data: pod 4's claim is deleted first (by the UID observed), and node 5 is
// added on an empty volume and copies everything from the leader. The brokers' Raft logs (their
// configuration entries, read from the volumes as the chaos cells read them) show node 5 removed,
// added and promoted, once each, and no other change; no acknowledged message is lost.
import { afterEach, expect, it } from 'vitest';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { changesSince, claimUid, eventCounts, raftLog, stepsSince } from './data-safety.ts';
import { annotate, formed, getCluster, patchSpec, pods, scenario, seedSpec, sleep, voterIps, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('scale-down-cancel: a scale-down cancelled in its middle ends Cancelled, and its removed node comes back only on an empty volume', async () => {
  s = await scenario('scalecancel');
  await s.install({ extra: ['--drain-wait=10s'] });
  let qc = await formed(s, seedSpec({ replicas: 5 }));
  // Node 5 must not lead (it would be stopped once to hand leadership away first), nor node 4.
  while ((qc.status?.leader ?? 0) > 3) {
    const p = (await pods(s)).find((x) => x.metadata?.name === `queen-${qc.status!.leader! - 1}`)!;
    await s.core.deleteNamespacedPod({ namespace: s.ns, name: p.metadata!.name!, body: { preconditions: { uid: p.metadata!.uid! } } });
    const was = qc.status!.leader;
    qc = await waitForCluster(s, 'another leader, every pod Ready', (q) => q.status?.leader !== was && q.status?.leader != null && !!q.status?.members?.every((m) => m.ready && m.live) && q.status?.phase === 'Ready', 120_000);
  }
  const log = await raftLog(s);
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 50 });
  await sleep(3000);
  await log.poll();
  const before = log.lastIndex();
  const seen = await eventCounts(s);
  const nodeFiveClaim = await claimUid(s, 4);

  await patchSpec(s, { replicas: 3 });
  await waitForCluster(
    s,
    "node 5's removal draining its pod",
    (q) => q.status?.operation?.gate === 'requests-drained' && (q.status.message ?? '').startsWith('removing node 5 from the membership: letting the requests in flight'),
    120_000,
  );
  await annotate(s, { 'queenmq.com/cancel': 'true' });
  const cancelled = await waitForCluster(s, 'the scale-down ended', (q) => q.status?.lastOperation?.type === 'ScaleVoters' && !q.status.operation, 120_000);
  expect(cancelled.status?.lastOperation?.result).toBe('Cancelled');
  expect(cancelled.status?.lastOperation?.message).toBe(
    `changing the voters to 3 voters was cancelled after removing node 5 from the membership; to resume: kubectl -n ${s.ns} annotate queencluster queen queenmq.com/retry=$(date +%s) --overwrite`,
  );
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([
    ['formCluster', 'COMPLETED'],
    ['scaleVoters', 'CANCELLED'],
  ]);
  // Nothing more moves: node 4 stays, pod 4 (node 5's) stays out of the client Services on its data.
  await sleep(10_000);
  const after = await getCluster(s);
  expect(after.status?.voters).toEqual([1, 2, 3, 4]);
  expect(after.status?.operation ?? null).toBeNull();
  expect(after.metadata.annotations?.['queenmq.com/cancel']).toBeUndefined();
  expect([after.status?.phase, after.status?.message]).toEqual(['Blocked', cancelled.status?.lastOperation?.message]);
  const pod4 = (await pods(s)).find((p) => p.metadata?.name === 'queen-4');
  expect(pod4?.metadata?.labels?.['queenmq.com/serving']).toBe('false');
  expect(await claimUid(s, 4)).toBe(nodeFiveClaim);
  expect(await stepsSince(s, seen)).toEqual(['RemoveMember: removing node 5 from the membership']);
  expect(await changesSince(log, before)).toEqual(['remove 5']);

  // 5 voters asked again: node 5 comes back, its old data deleted first.
  await patchSpec(s, { replicas: 5 });
  const back = await waitForCluster(
    s,
    'five voters again',
    (q) => JSON.stringify(q.status?.voters) === '[1,2,3,4,5]' && q.status?.phase === 'Ready' && q.status?.lastOperation?.target === '5 voters' && q.status.lastOperation.result === 'Succeeded',
    300_000,
  );
  expect(back.status?.lastOperation?.message).toBe(
    'the cluster has 5 voters: deleting the volume of pod 4: it holds the data node 5 had before it left the membership, adding node 5 as a learner, promoting node 5 to voters',
  );
  expect(await claimUid(s, 4)).not.toBe(nodeFiveClaim);
  expect(await stepsSince(s, seen)).toEqual([
    'RemoveMember: removing node 5 from the membership',
    'WipeVolume: deleting the volume of pod 4: it holds the data node 5 had before it left the membership',
    'AddLearner: adding node 5 as a learner',
    'Promote: promoting node 5 to voters',
  ]);
  expect(await changesSince(log, before)).toEqual(['remove 5', 'learner 5', 'promote 5']);
  expect(log.problems).toEqual([]);
  expect(await verifyAcknowledged(await load.stop(), await voterIps(s))).toEqual([]);
});
