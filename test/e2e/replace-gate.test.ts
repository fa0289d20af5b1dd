// e2e `replace-gate`: the data-safety rules on a replacement.
// The removal gate: the node a replacement takes out of the membership leaves through the stop gate,
// as a scale-down's does. A follower's volume is wiped behind the operator's back (a stale voter:
// the leader hears from it, but it applies nothing), and a person asks for the other follower, a
// healthy one, to be replaced: taking it out would leave two voters, one of which cannot take a
// write. Its node stays, and the status says why. The person then names the stale pod instead: the
// first replacement is called off before its node left, and the stale node is replaced (its own
// stall holds nothing back).
// The ban on old data: a replacement that ends early, after its node left the membership and before
// its volume went (a change policy refuses to delete the claim: the step fails), leaves a pod running
// on the data of a node that is no longer a member. The person lifts the policy and drops the
// request: the voters wanted bring the node back, and its claim is deleted first (by the UID
// observed), so it comes back on an empty volume and copies everything from the leader.
// The brokers' Raft logs (their configuration entries, read from the volumes as the chaos cells
// read them) show each membership change once and no other; no acknowledged message is lost.
import { afterEach, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { changesSince, claimUid, eventCounts, freezeClaimDeletes, raftLog, stepsSince } from './data-safety.ts';
import { annotate, clusterEvents, formed, getCluster, pods, scenario, seedSpec, sleep, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('replace-gate: a replaced node leaves through the removal gate, and one that left never comes back with its old data', async () => {
  s = await scenario('replacegate');
  await s.install({ stallAfter: '5s', probeInterval: '5s' });
  const qc = await formed(s, seedSpec());
  const log = await raftLog(s);
  const leader = qc.status!.leader!;
  const [stale, healthy] = [1, 2, 3].filter((id) => id !== leader) as [number, number];

  // More than 1000 entries of history: the wiped voter is then far enough behind to be told stalled.
  const history = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 250, queue: 'history' });
  await waitFor('1100 messages of history acknowledged', async () => history.progress().acknowledged > 1100, 120_000);
  const acknowledged = await history.stop();
  await control.wipe(s.ns, `queen-${stale - 1}`);
  await waitForCluster(s, 'the stale voter reported', (q) => /has to be replaced$/.test(q.status?.message ?? ''), 120_000);

  // The healthy follower asked to be replaced: its node does not leave while the other one is stalled.
  await log.poll();
  const before = log.lastIndex();
  await annotate(s, { 'queenmq.com/replace-pod': `queen-${healthy - 1}` });
  const held = await waitForCluster(s, 'the replacement held at the removal gate', (q) => q.status?.operation?.type === 'ReplaceNode' && q.status.operation.gate === 'voter-not-stalled', 60_000);
  expect(held.status?.message).toMatch(
    new RegExp(`^node ${healthy} is next to leave the membership: node ${stale} is behind the leader and does not catch up \\(\\d+ entr(y|ies) behind\\): if its volume was wiped or put back from a copy, it has to be replaced$`),
  );
  await sleep(5000);
  expect(await changesSince(log, before)).toEqual([]);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RemoveMember')).toEqual([]);
  expect((await getCluster(s)).status?.voters).toEqual([1, 2, 3]);

  // The stale pod named instead: the first replacement is called off, the stale node replaced.
  await annotate(s, { 'queenmq.com/replace-pod': `queen-${stale - 1}` });
  const replaced = await waitForCluster(
    s,
    'the stale node replaced',
    (q) => q.status?.lastOperation?.target === `queen-${stale - 1}` && q.status.lastOperation.result === 'Succeeded' && q.status.phase === 'Ready' && JSON.stringify(q.status.voters) === '[1,2,3]',
    300_000,
  );
  expect(replaced.metadata.annotations?.['queenmq.com/replace-pod']).toBeUndefined();
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([
    ['formCluster', 'COMPLETED'],
    ['replaceNode', 'COMPLETED'],
    ['replaceNode', 'COMPLETED'],
  ]);
  expect(await s.temporal.workflow.getHandle(runs[1]!.workflowId, runs[1]!.runId).result()).toBe(
    `the replacement of pod ${healthy - 1} was called off before node ${healthy} left the membership: the membership and the volume are as they were`,
  );
  // Only the stale node left and came back: the healthy one never left.
  expect(await changesSince(log, before)).toEqual([`remove ${stale}`, `learner ${stale}`, `promote ${stale}`]);

  // A replacement that ends after its node left and before its volume went (of a follower: a
  // leader's would hand leadership away first).
  const lead = (await getCluster(s)).status!.leader!;
  const target = [healthy, stale].find((id) => id !== lead)!;
  await log.poll();
  const later = log.lastIndex();
  const seen = await eventCounts(s);
  const oldClaim = await claimUid(s, target - 1);
  const oldPod = (await pods(s)).find((p) => p.metadata?.name === `queen-${target - 1}`)!.metadata!.uid;
  const lift = await freezeClaimDeletes(s);
  await annotate(s, { 'queenmq.com/replace-pod': `queen-${target - 1}` });
  const failed = await waitForCluster(
    s,
    'the replacement ended early',
    (q) => q.status?.lastOperation?.target === `queen-${target - 1}` && q.status.lastOperation.result === 'Failed' && !q.status.operation,
    300_000,
  );
  expect(failed.status?.lastOperation?.message).toMatch(
    new RegExp(`^the replacement of queen-${target - 1} failed: deleting the volume of pod ${target - 1}: the API server refused it \\(403\\): .*volume claims are kept by the change policy; to resume: `),
  );
  // Its node left; its pod runs on, on the data that node had; nothing added it back.
  expect(failed.status?.voters).toEqual([1, 2, 3].filter((id) => id !== target));
  expect(await claimUid(s, target - 1)).toBe(oldClaim);
  expect((await pods(s)).find((p) => p.metadata?.name === `queen-${target - 1}`)?.metadata?.uid).toBe(oldPod);
  await sleep(5000);
  expect(await changesSince(log, later)).toEqual([`remove ${target}`]);

  // The person lifts the policy and drops the request: the voters wanted bring the node back, empty.
  await lift();
  await annotate(s, { 'queenmq.com/replace-pod': null });
  const back = await waitForCluster(
    s,
    'three voters again',
    (q) => JSON.stringify(q.status?.voters) === '[1,2,3]' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'ScaleVoters' && q.status.lastOperation.result === 'Succeeded',
    300_000,
  );
  expect(back.status?.lastOperation?.target).toBe('3 voters');
  expect(await claimUid(s, target - 1)).not.toBe(oldClaim);
  expect(await stepsSince(s, seen)).toEqual([
    `ReplaceStarted: replacing pod ${target - 1}`,
    `RemoveMember: removing node ${target} from the membership`,
    `WipeVolume: deleting the volume of pod ${target - 1}: it holds the data node ${target} had before it left the membership`,
    `AddLearner: adding node ${target} as a learner`,
    `Promote: promoting node ${target} to voters`,
  ]);
  // Added back once, after it left, and only once its old data was gone.
  expect(await changesSince(log, later)).toEqual([`remove ${target}`, `learner ${target}`, `promote ${target}`]);
  expect(log.problems).toEqual([]);
  expect(await verifyAcknowledged(acknowledged, await voterIps(s))).toEqual([]);
});
