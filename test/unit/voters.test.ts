// The voter changes as table tests: the reference operator's scenarios S3 (3 to 5), S4 (5 to 3)
// and S5 (3 to 1), and the gaps closed (G5: never fewer pods than members; G8: claims deleted).
import { describe, expect, it } from 'vitest';
import type { Observation } from '../../plan/observation.ts';
import { learnerNearlyCaughtUp, nextVoterStep } from '../../plan/voters.ts';
import { cluster, member, pod, setMember } from './fixture.ts';

function removeMember(obs: Observation, id: number) {
  const m = obs.membership!;
  m.voters = m.voters.filter((v) => v !== id);
  m.learners = m.learners.filter((v) => v !== id);
  m.members = m.members.filter((x) => x.nodeId !== id);
}
function scalePods(obs: Observation, n: number) {
  obs.statefulSet!.replicas = n;
  obs.pods = obs.pods.filter((p) => p.ordinal < n);
}
function addPod(obs: Observation, ordinal: number, running = true) {
  const p = structuredClone(obs.pods[0]!);
  Object.assign(p, { ordinal, name: `queen-${ordinal}`, uid: `uid-${ordinal}`, running, ready: running });
  obs.pods.push(p);
  obs.claims.push({ ...obs.claims[0]!, ordinal, name: `data-queen-${ordinal}`, uid: `claim-${ordinal}` });
  if (running) obs.health[ordinal] = { ...obs.health[0]! };
  else delete obs.health[ordinal];
}

describe('3 to 5 voters: learners first, promoted together (S3)', () => {
  it('pods, then each learner, then one promotion of both', () => {
    const obs = cluster(3, 3, 1);
    expect(nextVoterStep(obs, 5)).toEqual({ kind: 'scale-pods', pods: 5, message: 'adding pods for 5 voters' });
    obs.statefulSet!.replicas = 5;
    addPod(obs, 3, false);
    addPod(obs, 4, false);
    expect(nextVoterStep(obs, 5)).toMatchObject({ kind: 'wait', message: 'waiting for pod 3 to start before node 4 is added' });
    pod(obs, 3).running = true;
    // A new node on an empty volume: it answers 503 settling and has applied nothing.
    obs.health[3] = { ...obs.health[0]!, status: 503, healthy: false, role: 'learner', applied: 0, commit: 0 };
    expect(nextVoterStep(obs, 5)).toEqual({ kind: 'add-learner', nodeId: 4, message: 'adding node 4 as a learner' });
    setMember(obs, member(4, false, 20));
    pod(obs, 4).running = true;
    obs.health[4] = { ...obs.health[0]!, status: 503, healthy: false, role: 'learner', applied: 0, commit: 0 };
    expect(nextVoterStep(obs, 5)).toEqual({ kind: 'add-learner', nodeId: 5, message: 'adding node 5 as a learner' });
    setMember(obs, member(5, false, 40_000));
    expect(nextVoterStep(obs, 5)).toMatchObject({ kind: 'wait', message: 'learner 5 is catching up (40000 entries behind)' });
    setMember(obs, member(5, false, 12));
    expect(nextVoterStep(obs, 5)).toEqual({ kind: 'promote', nodeIds: [4, 5], message: 'promoting nodes 4 and 5 to voters' });
    setMember(obs, member(4, true, 0));
    setMember(obs, member(5, true, 0));
    // Promoted, healthy, but pod 3's readiness probe has not passed yet: the change ends once it serves.
    pod(obs, 4).ready = true;
    pod(obs, 3).ready = false;
    obs.health[3] = { ...obs.health[0]! };
    obs.health[4] = { ...obs.health[0]! };
    expect(nextVoterStep(obs, 5)).toEqual({ kind: 'wait', message: 'waiting for pod 3 to be Ready', gate: 'pod-ready' });
    // Its node live and caught up but its /health still 503 (settling after the promotion): waited for too.
    obs.health[3] = { ...obs.health[0]!, status: 503, healthy: false };
    expect(nextVoterStep(obs, 5)).toEqual({ kind: 'wait', message: 'waiting for pod 3 to be Ready', gate: 'pod-ready' });
    // A pod that does not answer healthy and whose node is not live is not: no change of the voters makes it serve.
    setMember(obs, { ...member(4, true, 0), live: false });
    expect(nextVoterStep(obs, 5)).toEqual({ kind: 'done' });
    setMember(obs, member(4, true, 0));
    pod(obs, 3).ready = true;
    obs.health[3] = { ...obs.health[0]! };
    expect(nextVoterStep(obs, 5)).toEqual({ kind: 'done' });
  });

  it('a learner near the end of its catch-up is looked at again soon; one receiving a snapshot is not', () => {
    const obs = cluster(3, 3, 1);
    const m = obs.membership!;
    expect(learnerNearlyCaughtUp(m)).toBe(false);
    setMember(obs, member(4, false, null));
    expect(learnerNearlyCaughtUp(m), 'its lag unknown: a snapshot on its way').toBe(false);
    setMember(obs, member(4, false, 40_000));
    expect(learnerNearlyCaughtUp(m)).toBe(false);
    setMember(obs, member(4, false, 9_000));
    expect(learnerNearlyCaughtUp(m)).toBe(true);
    expect(learnerNearlyCaughtUp(m, [5]), 'another learner than the one asked about').toBe(false);
    setMember(obs, { ...member(4, false, 9_000), live: false });
    expect(learnerNearlyCaughtUp(m), 'not live').toBe(false);
  });

  it('a new pod that does not start says why: a claim no volume binds, an image not pulled, a crash loop (found by the chaos matrix: a claim left unbound by an API server restart)', () => {
    const obs = cluster(3, 3, 1);
    obs.statefulSet!.replicas = 5;
    addPod(obs, 3, false);
    addPod(obs, 4, false);
    pod(obs, 3).unschedulable = '0/5 nodes are available: pod has unbound immediate PersistentVolumeClaims.';
    expect(nextVoterStep(obs, 5)).toEqual({
      kind: 'wait',
      message: 'waiting for pod 3 to start before node 4 is added: pod 3 cannot be scheduled: 0/5 nodes are available: pod has unbound immediate PersistentVolumeClaims.',
      gate: 'pod-running',
    });
    pod(obs, 3).unschedulable = null;
    Object.assign(pod(obs, 3), { waitingReason: 'ImagePullBackOff', waitingMessage: 'manifest unknown', image: 'ghcr.io/queen-mq/queen:2.6.9' });
    expect(nextVoterStep(obs, 5)).toMatchObject({ message: 'waiting for pod 3 to start before node 4 is added: pod 3 cannot pull its image ghcr.io/queen-mq/queen:2.6.9 (ImagePullBackOff: not found)' });
    Object.assign(pod(obs, 3), { waitingReason: 'CrashLoopBackOff', waitingMessage: null, lastExitCode: 1, restarts: 4 });
    expect(nextVoterStep(obs, 5)).toMatchObject({ message: 'waiting for pod 3 to start before node 4 is added: pod 3 is crash-looping: its container exited with code 1 (4 restarts)' });
    Object.assign(pod(obs, 3), { waitingReason: 'ContainerCreating' });
    expect(nextVoterStep(obs, 5)).toMatchObject({ message: 'waiting for pod 3 to start before node 4 is added' });
    // No scheduler placed it (the chaos soak saw the kube-scheduler gone after an API server restart).
    Object.assign(pod(obs, 3), { waitingReason: null, node: null, notPlaced: 'no scheduler has placed it for 45s' });
    expect(nextVoterStep(obs, 5)).toMatchObject({ message: 'waiting for pod 3 to start before node 4 is added: pod 3 is not scheduled: no scheduler has placed it for 45s' });
  });
});

describe('5 to 3 voters: each node leaves the membership before its pod goes (S4)', () => {
  it('node 5 leaves, node 4 (the leader) hands off and leaves, then their pods go together, then their claims in one step', () => {
    const obs = cluster(5, 5, 2);
    expect(nextVoterStep(obs, 3)).toEqual({ kind: 'remove-member', nodeId: 5, message: 'removing node 5 from the membership' });
    removeMember(obs, 5);
    // Pod 4 (node 5's) waits, out of the client Services, until node 4 has left too.
    obs.membership!.leader = 4;
    expect(nextVoterStep(obs, 3)).toMatchObject({ kind: 'hand-off', nodeId: 4, message: 'node 4 leads: stopping its pod once so it hands leadership away before it is removed' });
    pod(obs, 3).terminating = true;
    expect(nextVoterStep(obs, 3)).toMatchObject({ kind: 'wait', message: 'node 4 leads and is leaving: waiting for another leader' });
    pod(obs, 3).terminating = false;
    obs.membership!.leader = 1;
    expect(nextVoterStep(obs, 3)).toEqual({ kind: 'remove-member', nodeId: 4, message: 'removing node 4 from the membership' });
    removeMember(obs, 4);
    expect(nextVoterStep(obs, 3)).toEqual({ kind: 'scale-pods', pods: 3, message: 'removing the pods above node 3' });
    scalePods(obs, 3);
    // The claims of pods 3 and 4 stay behind the StatefulSet (whenScaled: Retain): the operator deletes them (G8).
    expect(nextVoterStep(obs, 3)).toEqual({
      kind: 'delete-claims',
      claims: [
        { ordinal: 3, claimName: 'data-queen-3', claimUid: 'claim-d', message: 'deleting the volume claim of pod 3' },
        { ordinal: 4, claimName: 'data-queen-4', claimUid: 'claim-e', message: 'deleting the volume claim of pod 4' },
      ],
      message: 'deleting the volume claims of pods 3 and 4',
    });
    obs.claims = obs.claims.filter((c) => c.ordinal < 3);
    expect(nextVoterStep(obs, 3)).toEqual({ kind: 'done' });
  });

  it('a claim waits for its pod to be gone', () => {
    const obs = cluster(5, 3, 2);
    obs.statefulSet!.replicas = 3;
    pod(obs, 4).terminating = true;
    obs.pods = obs.pods.filter((p) => p.ordinal !== 3);
    expect(nextVoterStep(obs, 3)).toEqual({ kind: 'wait', message: 'waiting for pod 4 to go before its volume claim is deleted', gate: 'pod-gone' });
  });
});

describe('3 to 1 voter: two voters never lose one before it left the membership (S5)', () => {
  it('removes node 3, then node 2, then their pods', () => {
    const obs = cluster(3, 3, 1);
    expect(nextVoterStep(obs, 1)).toMatchObject({ kind: 'remove-member', nodeId: 3 });
    removeMember(obs, 3);
    expect(nextVoterStep(obs, 1)).toMatchObject({ kind: 'remove-member', nodeId: 2 });
    removeMember(obs, 2);
    expect(nextVoterStep(obs, 1)).toMatchObject({ kind: 'scale-pods', pods: 1, message: 'removing the pods above node 1' });
  });

  it('a leader that leaves hands leadership away first, the leader of two too', () => {
    const obs = cluster(3, 3, 3);
    expect(nextVoterStep(obs, 1)).toMatchObject({ kind: 'hand-off', nodeId: 3 });
    // The hand-off went to node 2, which leaves too.
    obs.membership!.leader = 2;
    expect(nextVoterStep(obs, 1)).toMatchObject({ kind: 'remove-member', nodeId: 3 });
    removeMember(obs, 3);
    expect(nextVoterStep(obs, 1)).toMatchObject({ kind: 'hand-off', nodeId: 2 });
  });
});

describe('the StatefulSet never has fewer pods than members (G5)', () => {
  it('a StatefulSet scaled down by hand is scaled back', () => {
    const obs = cluster(3, 3, 1);
    obs.statefulSet!.replicas = 2;
    expect(nextVoterStep(obs, 3)).toEqual({ kind: 'scale-pods', pods: 3, message: 'adding pods for 3 voters' });
  });
  it('nothing moves while a membership change is in flight', () => {
    const obs = cluster(3, 3, 1);
    obs.membership!.changeInFlight = true;
    expect(nextVoterStep(obs, 5)).toMatchObject({ kind: 'wait', message: 'a membership change is in flight' });
  });
});

describe('a node that left the membership never comes back with its old data (queen-broker-api 2.5)', () => {
  it('after a scale-down that stopped between the removal and the pods: its volume is emptied before it is added', () => {
    // 3 to 1 cancelled after node 3 left; then 3 voters asked again. Pod 2 still runs on node 3's data.
    const obs = cluster(3, 3, 1);
    removeMember(obs, 3);
    const message = 'deleting the volume of pod 2: it holds the data node 3 had before it left the membership';
    expect(nextVoterStep(obs, 3)).toEqual({
      kind: 'wipe-claims',
      volumes: [{ nodeId: 3, ordinal: 2, claimName: 'data-queen-2', claimUid: 'claim-c', podName: 'queen-2', podUid: 'uid-2', message }],
      message,
    });
    // The pod goes with its claim; the new one starts empty and is added.
    pod(obs, 2).terminating = true;
    expect(nextVoterStep(obs, 3)).toMatchObject({ kind: 'wait', gate: 'pod-running' });
    Object.assign(pod(obs, 2), { terminating: false, uid: 'uid-2b' });
    obs.claims[2] = { ...obs.claims[2]!, uid: 'claim-c2' };
    obs.health[2] = { ...obs.health[2]!, status: 503, healthy: false, role: 'learner', applied: 0, commit: 0 };
    expect(nextVoterStep(obs, 3)).toEqual({ kind: 'add-learner', nodeId: 3, message: 'adding node 3 as a learner' });
  });
  it('after nodes 3 and 2 left: both volumes are emptied in one step, before either node is added', () => {
    // Emptied one at a time, node 2 would run empty while node 3 still runs on its data, and an
    // empty node's vote makes a node that missed its removal lead (test/sim/stale-member.test.ts).
    const obs = cluster(3, 3, 1);
    removeMember(obs, 3);
    removeMember(obs, 2);
    const s = nextVoterStep(obs, 3);
    expect(s).toMatchObject({ kind: 'wipe-claims', message: 'deleting the volumes of pods 1 and 2: they hold the data nodes 2 and 3 had before they left the membership' });
    expect(s.kind === 'wipe-claims' && s.volumes.map((v) => [v.ordinal, v.nodeId, v.claimUid, v.podUid])).toEqual([
      [1, 2, 'claim-b', 'uid-1'],
      [2, 3, 'claim-c', 'uid-2'],
    ]);
  });
  it('a pod whose node is not a member and has not answered yet: no volume is emptied until it does', () => {
    const obs = cluster(3, 3, 1);
    removeMember(obs, 3);
    removeMember(obs, 2);
    delete obs.health[2];
    expect(nextVoterStep(obs, 3)).toMatchObject({ kind: 'wait', gate: 'pod-running', message: 'waiting for pod 2 to start before a volume is emptied: whether node 3 kept its data decides which' });
    // Once it answers empty (a new pod on a new claim), only pod 1's volume is emptied.
    obs.health[2] = { ...obs.health[1]!, applied: 0, commit: 0, role: 'learner' };
    expect(nextVoterStep(obs, 3)).toMatchObject({ kind: 'wipe-claims', volumes: [{ ordinal: 1, nodeId: 2 }] });
  });
  it('a learner that holds data is a member: it is promoted, not emptied', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, member(3, false, 0));
    obs.membership!.voters = [1, 2];
    obs.membership!.learners = [3];
    expect(nextVoterStep(obs, 3)).toEqual({ kind: 'promote', nodeIds: [3], message: 'promoting node 3 to voters' });
  });
});

describe('without its StatefulSet, a scale waits for the cluster to be formed again', () => {
  it('says so, with the gate', () => {
    const obs = cluster(3, 3, 1);
    obs.statefulSet = null;
    expect(nextVoterStep(obs, 5)).toEqual({ kind: 'wait', message: 'the StatefulSet queen is gone: the cluster has to be formed again', gate: 'statefulset-present' });
  });
});
