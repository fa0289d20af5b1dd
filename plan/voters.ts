// The next step towards the number of voters wanted. Going up: pods first, then each new node as
// a learner, then all of them promoted in one change once every one has caught up, so the cluster
// never rests on an even count. Going down: each node leaves the membership while its pod still
// runs (a leader hands leadership away first), then the pods above it go, then their claims.
// A node that left the membership never comes back with its old data (the broker forbids it):
// a pod whose node is not a member but holds data gets an empty volume before it is added.
import { podStartProblem } from './assess.ts';
import { idsText, lagText, podsText } from './format.ts';
import { liveClaimAt, memberOf, type MembershipObservation, type Observation, podAt } from './observation.ts';
import type { GateName } from './gates.ts';

export type VoterStep =
  | { kind: 'done' }
  | { kind: 'wait'; message: string; gate: GateName }
  | { kind: 'scale-pods'; pods: number; message: string }
  | { kind: 'add-learner'; nodeId: number; message: string }
  | { kind: 'promote'; nodeIds: number[]; message: string }
  | { kind: 'hand-off'; nodeId: number; message: string }
  | { kind: 'remove-member'; nodeId: number; message: string }
  // One volume a step, as runs before 'wipe-claims' recorded it: taken when such a history replays.
  | ({ kind: 'wipe-claim' } & VolumeToWipe)
  | { kind: 'wipe-claims'; volumes: VolumeToWipe[]; message: string }
  // One claim a step, as runs before 'delete-claims' recorded it: taken when such a history replays.
  | { kind: 'delete-claim'; ordinal: number; claimName: string; claimUid: string; message: string }
  | { kind: 'delete-claims'; claims: ClaimToDelete[]; message: string };

/** The volume of a pod whose node left the membership and kept its data, with its own line (and Event). */
export interface VolumeToWipe {
  nodeId: number;
  ordinal: number;
  claimName: string;
  claimUid: string;
  podName: string;
  podUid: string;
  message: string;
}

/** A claim of a pod gone for good, with its own line (and Event). */
export interface ClaimToDelete {
  ordinal: number;
  claimName: string;
  claimUid: string;
  message: string;
}

/**
 * `checked`, when given, collects the gates this rule looked at on its way to the step it returns
 * (each a wait it could have returned instead): what holds that step back before it runs, as a plan
 * lists it (plan/steps.ts voterStep).
 */
export function nextVoterStep(obs: Observation, wanted: number, checked: GateName[] = []): VoterStep {
  const m = obs.membership;
  checked.push('leader-known');
  if (!m) return { kind: 'wait', message: "waiting for a leader's view of the membership", gate: 'leader-known' };
  checked.push('no-change-in-flight');
  if (m.changeInFlight || m.joint) return { kind: 'wait', message: 'a membership change is in flight', gate: 'no-change-in-flight' };
  checked.push('statefulset-present');
  if (!obs.statefulSet || obs.statefulSet.terminating) {
    return { kind: 'wait', message: `the StatefulSet ${obs.name} is gone: the cluster has to be formed again`, gate: 'statefulset-present' };
  }
  const pods = obs.statefulSet?.replicas ?? 0;
  const memberIds = m.members.map((x) => x.nodeId);
  const top = Math.max(wanted, ...memberIds);

  // Never fewer pods than the members that need them (a StatefulSet scaled down by hand included).
  if (pods < top) return { kind: 'scale-pods', pods: top, message: `adding pods for ${top} voters` };
  // A pod above every member takes requests it can no longer commit: it goes at once, unless nodes
  // above the voters wanted are still to leave. Those leave first, one change at a time, their pods
  // (and those of the nodes that left) out of the client Services since the first of them left;
  // then the pods above go together, so that they stop side by side.
  const extra = memberIds.filter((id) => id > wanted).sort((a, b) => b - a);
  if (pods > top && extra.length === 0) return { kind: 'scale-pods', pods: top, message: `removing the pods above node ${top}` };

  const learners = [];
  for (let id = 1; id <= wanted; id++) {
    const member = memberOf(m, id);
    if (member?.voter) continue;
    if (!member) {
      const pod = podAt(obs, id - 1);
      checked.push('pod-running');
      if (!pod || pod.terminating || !pod.running || !obs.health[id - 1]) {
        const why = podStartProblem(pod);
        return { kind: 'wait', message: `waiting for pod ${id - 1} to start before node ${id} is added${why ? `: ${why}` : ''}`, gate: 'pod-running' };
      }
      if (holdsOldData(obs, id)) return wipeOldData(obs, pods);
      return { kind: 'add-learner', nodeId: id, message: `adding node ${id} as a learner` };
    }
    learners.push(member);
  }
  if (learners.length > 0) {
    checked.push('learner-caught-up');
    for (const l of learners) {
      if (!l.live || l.lag === null || l.lag > m.promoteMaxLag) {
        return { kind: 'wait', message: `learner ${l.nodeId} is catching up${lagText(l.lag)}`, gate: 'learner-caught-up' };
      }
    }
    const ids = learners.map((l) => l.nodeId);
    return { kind: 'promote', nodeIds: ids, message: `promoting ${idsText(ids)} to voters` };
  }

  if (extra.length > 0) {
    const id = extra[0]!;
    if (handsOffBeforeLeaving(m, id)) {
      const pod = podAt(obs, id - 1);
      if (!pod || pod.terminating) return { kind: 'wait', message: `node ${id} leads and is leaving: waiting for another leader`, gate: 'leader-known' };
      return { kind: 'hand-off', nodeId: id, message: `node ${id} leads: stopping its pod once so it hands leadership away before it is removed` };
    }
    return { kind: 'remove-member', nodeId: id, message: `removing node ${id} from the membership` };
  }

  // The claims of pods that are gone for good (above the StatefulSet's count), once their pods are:
  // all in one step.
  const gone = obs.claims.filter((c) => c.ordinal >= pods && !c.terminating).sort((a, b) => a.ordinal - b.ordinal);
  if (gone.length > 0) {
    checked.push('pod-gone');
    const still = gone.find((c) => podAt(obs, c.ordinal));
    if (still) return { kind: 'wait', message: `waiting for pod ${still.ordinal} to go before its volume claim is deleted`, gate: 'pod-gone' };
    const claims = gone.map((c) => ({ ordinal: c.ordinal, claimName: c.name, claimUid: c.uid, message: `deleting the volume claim of pod ${c.ordinal}` }));
    const message = claims.length === 1 ? claims[0]!.message : `deleting the volume claims of ${podsText(claims.map((c) => c.ordinal))}`;
    return { kind: 'delete-claims', claims, message };
  }
  // A voter's pod that runs but is not Ready yet (its readiness probe has not passed since it
  // joined, or its node still settles after the promotion): the change ends once it serves, not a
  // moment before, so a scale-up does not end on a Degraded cluster. Waited for while the pod
  // answers healthy or its node is live and caught up (it serves within a probe period or two); a
  // pod that does not run, or whose node is not live or falls behind, is not: status says why, and
  // no change of the voters would make it serve.
  checked.push('pod-ready');
  for (let id = 1; id <= wanted; id++) {
    const pod = podAt(obs, id - 1);
    if (!pod || pod.terminating || !pod.running || pod.ready) continue;
    const member = memberOf(m, id);
    const caughtUp = !!member?.voter && member.live && member.lag !== null && member.lag <= m.promoteMaxLag;
    if (obs.health[id - 1]?.healthy || caughtUp) {
      return { kind: 'wait', message: `waiting for pod ${id - 1} to be Ready`, gate: 'pod-ready' };
    }
  }
  return { kind: 'done' };
}

/**
 * Every pod whose node left the membership and kept its data gets an empty volume in the same step,
 * before any of them is added back. A node that left without hearing of its removal still counts
 * itself a voter of the membership it knew; once a node of that membership runs empty, that node
 * grants it a vote (an empty log is behind every other), and the stale node leads a term newer than
 * the cluster's, over a log that lacks what the cluster committed since it left (the simulator
 * showed it: test/sim/stale-member.test.ts). So none is emptied while another pod whose node is not
 * a member has not answered yet (its data unknown), and all of them go together.
 */
function wipeOldData(obs: Observation, pods: number): VoterStep {
  const volumes: VolumeToWipe[] = [];
  for (let ordinal = 0; ordinal < pods; ordinal++) {
    const nodeId = ordinal + 1;
    if (memberOf(obs.membership, nodeId)) continue;
    const pod = podAt(obs, ordinal);
    if (!pod || pod.terminating || !pod.running || !obs.health[ordinal]) {
      const why = podStartProblem(pod);
      return { kind: 'wait', message: `waiting for pod ${ordinal} to start before a volume is emptied: whether node ${nodeId} kept its data decides which${why ? ` (${why})` : ''}`, gate: 'pod-running' };
    }
    if (!holdsOldData(obs, nodeId)) continue;
    const claim = liveClaimAt(obs, ordinal);
    if (!claim) return { kind: 'wait', message: `waiting for pod ${ordinal} to start on an empty volume before node ${nodeId} is added`, gate: 'pod-running' };
    volumes.push({
      nodeId,
      ordinal,
      claimName: claim.name,
      claimUid: claim.uid,
      podName: pod.name,
      podUid: pod.uid,
      message: `deleting the volume of pod ${ordinal}: it holds the data node ${nodeId} had before it left the membership`,
    });
  }
  return { kind: 'wipe-claims', volumes, message: wipeLine(volumes) };
}

/** The line of a step that empties these volumes (one volume: its own line). */
export function wipeLine(volumes: readonly VolumeToWipe[]): string {
  if (volumes.length === 1) return volumes[0]!.message;
  return `deleting the volumes of ${podsText(volumes.map((v) => v.ordinal))}: they hold the data ${idsText(volumes.map((v) => v.nodeId))} had before they left the membership`;
}

/**
 * Whether node `nodeId` hands leadership away before it leaves the membership: it leads. Its pod is
 * stopped once, through the stop gate, and its SIGTERM hands leadership to another voter (the
 * broker has no transfer endpoint). Even the leader of two voters does, though the other then
 * leads a cluster that commits nothing until the stopped pod is back: removing the leader
 * directly instead steps it down and makes the other elect itself, and the writes in flight
 * through it fail (outcome_unknown; e2e scale saw 6 of 2900 pushes fail so).
 */
export function handsOffBeforeLeaving(m: MembershipObservation, nodeId: number): boolean {
  return m.leader === nodeId;
}

/**
 * The pod of a node that is not a member holds data: it applied entries, which only a member
 * can have received. It was in the membership before (a scale-down or a replacement that ended
 * early) and may not come back with that data; an empty node applies nothing until it is added.
 */
export function holdsOldData(obs: Observation, nodeId: number): boolean {
  if (memberOf(obs.membership, nodeId)) return false;
  const h = obs.health[nodeId - 1];
  return !!h && h.applied > 0;
}

/**
 * How soon a wait on learners catching up looks again once one of them is near the end: what only
 * the brokers show is otherwise seen a poll interval (2 s by default) late, and near the end that
 * interval is most of the wait.
 */
const NEAR_CAUGHT_UP_LOOK_MS = 250;

/**
 * A learner (of `ids`, or any) is live, has a known lag, and is within ten times promoteMaxLag of
 * the leader: it is caught up within seconds. While its lag is unknown (a snapshot on its way) it
 * is not.
 */
export function learnerNearlyCaughtUp(m: MembershipObservation | null, ids?: number[]): boolean {
  if (!m) return false;
  return m.members.some((x) => !x.voter && (!ids || ids.includes(x.nodeId)) && x.live && x.lag !== null && x.lag <= 10 * m.promoteMaxLag);
}

/**
 * How soon a wait held by a membership change in flight looks again: the change commits within a
 * heartbeat or two, and nothing the process watches (no Kubernetes object) says when. Only for
 * CHANGE_IN_FLIGHT_FAST_MS after the change was first seen: one that does not commit (no quorum, a
 * joint configuration left behind) is looked at at the wait's poll, not seven times a second.
 */
export const CHANGE_IN_FLIGHT_LOOK_MS = 150;
export const CHANGE_IN_FLIGHT_FAST_MS = 3000;

/** When a wait held by a membership change in flight, first seen at `since`, looks again (a hold's lookAgainAt). */
export function changeInFlightLookAgainAt(now: number, since: number): number | undefined {
  return now - since < CHANGE_IN_FLIGHT_FAST_MS ? now + CHANGE_IN_FLIGHT_LOOK_MS : undefined;
}

/** When a wait on learners catching up looks again, if sooner than its poll (a hold's lookAgainAt). */
export function catchUpLookAgainAt(m: MembershipObservation | null, now: number, ids?: number[]): number | undefined {
  return learnerNearlyCaughtUp(m, ids) ? now + NEAR_CAUGHT_UP_LOOK_MS : undefined;
}
