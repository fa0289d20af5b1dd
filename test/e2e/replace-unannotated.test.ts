// e2e `replace-unannotated`: a replacement whose annotation is removed after its node left the
// membership. Removing it before the node left calls the replacement off (replace-gate); after that
// the node is always added back, because only then is the cluster whole again, and always on an
// empty volume: its claim (the UID recorded when the replacement began) is deleted before the node
// is added as a learner, so it never comes back with the data it had. The operation ends Succeeded,
// starts nothing else, and the annotation stays removed. The brokers' Raft logs (their
// configuration entries, read from the volumes as the chaos cells read them) show the node removed,
// added and promoted, once each, in that order, and no other change; no acknowledged message is lost.
import { afterEach, expect, it } from 'vitest';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { changesSince, claimUid, eventCounts, raftLog, stepsSince } from './data-safety.ts';
import { annotate, formed, getCluster, scenario, seedSpec, sleep, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('replace-unannotated: the annotation removed after the node left does not call the replacement off, and the node comes back empty', async () => {
  s = await scenario('replaceunann');
  await s.install();
  const qc = await formed(s, seedSpec());
  const log = await raftLog(s);
  const target = [3, 2, 1].find((id) => id !== qc.status!.leader)!;
  const ordinal = target - 1;
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 50 });
  await sleep(3000);
  await log.poll();
  const before = log.lastIndex();
  const seen = await eventCounts(s);
  const oldClaim = await claimUid(s, ordinal);

  await annotate(s, { 'queenmq.com/replace-pod': `queen-${ordinal}` });
  // The moment its node has left (status follows each membership change at once), the request goes.
  await waitFor(`node ${target} out of the membership`, async () => !(await getCluster(s!)).status?.voters?.includes(target), 120_000);
  await annotate(s, { 'queenmq.com/replace-pod': null });
  const during = await getCluster(s);
  // (The annotation went while the replacement still ran, before the node was back.)
  expect(during.status?.operation?.type).toBe('ReplaceNode');
  expect(during.status?.voters).not.toContain(target);

  const done = await waitForCluster(
    s,
    'the replacement done',
    (q) => q.status?.lastOperation?.type === 'ReplaceNode' && !q.status.operation && q.status.phase === 'Ready' && JSON.stringify(q.status.voters) === '[1,2,3]',
    300_000,
  );
  expect(done.status?.lastOperation?.result).toBe('Succeeded');
  expect(done.status?.lastOperation?.message).toBe(`pod ${ordinal} is a voter again: node ${target} left the membership, got an empty volume and caught up from the leader`);
  expect(done.metadata.annotations?.['queenmq.com/replace-pod']).toBeUndefined();
  expect(await claimUid(s, ordinal)).not.toBe(oldClaim);
  // Nothing else started after it.
  await sleep(5000);
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([
    ['formCluster', 'COMPLETED'],
    ['replaceNode', 'COMPLETED'],
  ]);
  expect(await stepsSince(s, seen)).toEqual([
    `ReplaceStarted: replacing pod ${ordinal}`,
    `RemoveMember: removing node ${target} from the membership`,
    `WipeVolume: deleting the volume of pod ${ordinal}`,
    `AddLearner: adding node ${target} as a learner`,
    `Promote: promoting node ${target} to voters`,
    `ReplaceFinished: pod ${ordinal} is a voter again`,
  ]);
  expect(await changesSince(log, before)).toEqual([`remove ${target}`, `learner ${target}`, `promote ${target}`]);
  expect(log.problems).toEqual([]);
  expect(await verifyAcknowledged(await load.stop(), await voterIps(s))).toEqual([]);
});
