// e2e `removal-gate` (issue 8, items 4 and 6): removing a member passes the stop gate, and a yield
// is sent once. A follower's volume is wiped behind the operator's back (a stale voter: it answers
// the leader, so the broker counts it live, but it applies nothing). The voters are then scaled
// from 3 to 1. Removing the healthy node 3 first would leave two voters, one of which cannot take
// a write: a cluster that cannot commit. The removal waits on the same named gate as a pod stop,
// and says so. A person then asks for the stale node to be replaced: the scale, waiting, yields
// to the replacement (one signal in its history), the replacement takes the stale node out (its
// own stall holds nothing back), and the scale starts again and finishes.
import { afterEach, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { startLoad } from '../testbed/load.ts';
import { annotate, clusterEvents, formed, getCluster, patchSpec, pods, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { historyEvents, recordHistory, settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const STEPS = ['RemoveMember', 'ReplaceStarted', 'WipeVolume', 'AddLearner', 'Promote', 'ReplaceFinished', 'ScalePods'];

it('removal-gate: a healthy node does not leave while another voter is stalled; the scale yields once to the replacement, then finishes', async () => {
  s = await scenario('removalgate');
  await s.install({ stallAfter: '5s', probeInterval: '5s' });
  let qc = await formed(s, seedSpec());
  // Node 3 must not lead: its removal would start with a hand-off, which passes the stop gate already.
  if (qc.status?.leader === 3) {
    const p = (await pods(s)).find((x) => x.metadata?.name === 'queen-2')!;
    await s.core.deleteNamespacedPod({ namespace: s.ns, name: 'queen-2', body: { preconditions: { uid: p.metadata!.uid! } } });
    qc = await waitForCluster(s, 'another leader, every pod Ready', (q) => q.status?.leader !== 3 && q.status?.leader != null && !!q.status?.members?.every((m) => m.ready && m.live) && q.status?.phase === 'Ready', 120_000);
  }
  // More than 1000 entries of history: the wiped voter is then far enough behind to be told stalled.
  const history = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 250, queue: 'history' });
  await waitFor('1100 messages of history acknowledged', async () => history.progress().acknowledged > 1100, 120_000);
  await history.stop();
  const stale = [1, 2].find((id) => id !== qc.status?.leader)!;
  await control.wipe(s.ns, `queen-${stale - 1}`);
  await waitForCluster(s, 'the stale voter reported', (q) => /has to be replaced$/.test(q.status?.message ?? ''), 120_000);

  await patchSpec(s, { replicas: 1 });
  const held = await waitForCluster(s, 'the removal held at the gate', (q) => q.status?.operation?.type === 'ScaleVoters' && q.status.operation.gate === 'voter-not-stalled', 60_000);
  expect(held.status?.message).toMatch(
    new RegExp(`^node 3 is next to leave the membership: node ${stale} is behind the leader and does not catch up \\(\\d+ entr(y|ies) behind\\): if its volume was wiped or put back from a copy, it has to be replaced$`),
  );
  await sleep(5000);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RemoveMember')).toEqual([]);
  expect((await getCluster(s)).status?.voters).toEqual([1, 2, 3]);

  await annotate(s, { 'queenmq.com/replace-pod': `queen-${stale - 1}` });
  const done = await waitForCluster(
    s,
    'one voter, Ready',
    (q) => JSON.stringify(q.status?.voters) === '[1]' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'ScaleVoters' && q.status.lastOperation.result === 'Succeeded',
    300_000,
  );
  expect(done.metadata.annotations?.['queenmq.com/replace-pod']).toBeUndefined();
  const expected = [
    `replacing pod ${stale - 1}`,
    `removing node ${stale} from the membership`,
    `deleting the volume of pod ${stale - 1}`,
    `adding node ${stale} as a learner`,
    `promoting node ${stale} to voters`,
    `pod ${stale - 1} is a voter again`,
    'removing node 3 from the membership',
    'removing node 2 from the membership',
    'removing the pods above node 1',
  ];
  // A step said twice (node 2 leaves in the replacement and again in the scale, when node 2 was
  // the stale one) is one Event with a count, at the time it was last said.
  const folded = expected.filter((m, i) => expected.lastIndexOf(m) === i);
  const steps = (await clusterEvents(s)).filter((e) => STEPS.includes(e.reason!));
  expect(steps.map((e) => e.message), JSON.stringify(steps.map((e) => [e.reason, e.message, e.count]))).toEqual(folded);
  expect(steps.map((e) => e.count ?? 1)).toEqual(folded.map((m) => expected.filter((x) => x === m).length));
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([
    ['formCluster', 'COMPLETED'],
    ['scaleVoters', 'COMPLETED'],
    ['replaceNode', 'COMPLETED'],
    ['scaleVoters', 'COMPLETED'],
  ]);
  // The scale that waited got one yield signal, however often the watcher looked meanwhile.
  const yielded = runs[1]!;
  const signals = (await historyEvents(s, yielded)).filter((e) => e.workflowExecutionSignaledEventAttributes);
  expect(signals.map((e) => e.workflowExecutionSignaledEventAttributes?.signalName)).toEqual(['yield']);
  expect(await s.temporal.workflow.getHandle(yielded.workflowId, yielded.runId).result()).toBe('changing the voters to 1 voter yielded to ReplaceNode after no step');
  await recordHistory(s, yielded, 'scaleVoters-yielded');
});
