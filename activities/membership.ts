// Membership changes through the leader's pod, with their refusals in words: a transient code
// (a change in flight, an election, a learner still behind) is waited out and shown; a permanent
// one (address_mismatch, forbidden, last_voter, kinds_behind...) is Blocked with what to do.
// A voter leaves the membership through the stop gate, as a pod stops; a node whose pod holds
// the data it had before it left is never added back with it.
import { ApplicationFailure } from '@temporalio/common';
import { readAnnotations } from '../crd/annotations.ts';
import { withDefaults } from '../crd/defaults.ts';
import { ANNOTATIONS, type Phase, type QueenCluster } from '../crd/schema.ts';
import { idsText, lagText } from '../plan/format.ts';
import { stopGate, voterNodeDownProblem } from '../plan/gates.ts';
import type { ChangeGate } from '../plan/steps.ts';
import { memberOf, type MembershipObservation, type Observation, podAt } from '../plan/observation.ts';
import { catchUpLookAgainAt, CHANGE_IN_FLIGHT_FAST_MS, changeInFlightLookAgainAt, holdsOldData } from '../plan/voters.ts';
import { addLearner, promote, refusalAdvice, removeMember, type ChangeResult } from './broker.ts';
import { brokerToken, loadCluster, observeCluster, opLogger, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { holdUntil, Parking, type Hold } from './waits.ts';
import { drainEvent, drainPods, drainTarget, nodesLeave, setServing, type DrainTarget } from './drain.ts';
import { gateOptions, stallMemory, stopHold } from './gate.ts';
import { brokerBase } from './observe.ts';
import { ordinalOf, podHost } from './resources.ts';
import { patchClusterStatus } from './kube.ts';
import { observedStatus } from './status.ts';

/** Sends a membership change to the leader's pod; the words say what was refused and why. */
/** The membership change in flight each cluster's waits saw first in this process (its entry's index), and when. */
const inFlightSeen = new Map<string, { index: number | null; since: number }>();

/**
 * When a wait held by the membership change in flight of `m` looks again: soon while the change is
 * young (changeInFlightLookAgainAt), at its poll after.
 */
export function inFlightLookAgainAt(clusterUid: string, m: MembershipObservation, now = Date.now()): number | undefined {
  for (const [uid, seen] of inFlightSeen) if (now - seen.since > 10 * CHANGE_IN_FLIGHT_FAST_MS) inFlightSeen.delete(uid);
  let seen = inFlightSeen.get(clusterUid);
  if (!seen || seen.index !== m.membershipIndex) inFlightSeen.set(clusterUid, (seen = { index: m.membershipIndex, since: now }));
  return changeInFlightLookAgainAt(now, seen.since);
}

export async function changeThroughLeader(
  deps: ActivityDeps,
  qc: QueenCluster,
  obs: Observation,
  phase: Phase,
  what: string,
  nodeId: number,
  change: (base: string, token: string | null) => Promise<ChangeResult>,
): Promise<{ ok: true; membership: MembershipObservation } | { hold: Hold }> {
  const spec = withDefaults(qc.spec);
  const leader = obs.membership?.leader;
  const pod = leader != null ? podAt(obs, leader - 1) : undefined;
  const base = pod ? brokerBase(deps.settings.brokerAccess, qc, spec, pod) : null;
  if (!base) return { hold: { phase, message: `${what}: waiting for the leader's pod to answer`, gate: 'leader-known' satisfies ChangeGate } };
  const r = await change(base, await brokerToken(deps, qc));
  if (r.ok) return { ok: true, membership: r.membership };
  const answered = r.code ? `the leader answered "${r.code}"` : r.error;
  if (r.kind === 'permanent') {
    return { hold: { phase: 'Blocked', message: `${what}: ${answered}: ${refusalAdvice(r.code ?? '', nodeId)}`, gate: 'membership-change' satisfies ChangeGate } };
  }
  // A change waits for a quorum of the voters: one on a node that stopped is named (a soak found a
  // learner's addition held three minutes by "busy" while a voter's node was off, and nothing said so).
  const down = voterNodeDownProblem(obs, nodeId);
  // Another change is committing: it is done within a heartbeat or two.
  const lookAgainAt = r.code === 'in_flight' && obs.membership ? inFlightLookAgainAt(qc.metadata.uid ?? '', obs.membership) : undefined;
  return { hold: { phase, message: `${what}: ${answered}${down ? ` (${down})` : ''}`, gate: 'membership-change' satisfies ChangeGate, lookAgainAt } };
}

/**
 * Status follows a membership change at once (voters, learners, members, leader), not at the
 * observer's next look: a person, or a tool that counts the voters down, reads the membership
 * the cluster has. (After an operator restart the observer may be a minute away.) With `seen`,
 * an observation taken after the change, or the one taken before it with the membership the
 * leader answered the change with (as it stands right after the change committed).
 */
export async function mirrorMembership(deps: ActivityDeps, qc: QueenCluster, seen?: Observation): Promise<void> {
  try {
    const obs = seen ?? (await observeCluster(deps, qc));
    if (!obs.membership) return;
    await patchClusterStatus(deps.kube, qc.metadata.namespace, qc.metadata.name, observedStatus(obs, stallMemory(qc, obs)));
  } catch (err) {
    opLogger(deps, { namespace: qc.metadata.namespace, name: qc.metadata.name, uid: qc.metadata.uid ?? '' }).debug({ err: String(err) }, 'the membership goes into status at the next look');
  }
}

/**
 * Why the voter `nodeId` may not leave the membership now: the stop gate with its pod as the
 * target (every other voter Ready for minReadySeconds, live, caught up, none stalled, a write
 * committing through a pod that stays), its own stall excepted. A learner leaves without a gate.
 */
export async function removalHold(deps: ActivityDeps, qc: QueenCluster, obs: Observation, nodeId: number, phase: Phase): Promise<Hold | null> {
  if (!memberOf(obs.membership, nodeId)?.voter) return null;
  return stopHold(deps, qc, obs, nodeId - 1, { phase, next: `node ${nodeId} is next to leave the membership` }, { removing: true });
}

/** The pure part of the removal gate, checked once more right before the change (no write probe). */
export function removalHeld(deps: ActivityDeps, qc: QueenCluster, obs: Observation, nodeId: number): string | null {
  if (!memberOf(obs.membership, nodeId)?.voter) return null;
  if (readAnnotations(qc.metadata.annotations).pause) return `paused by the ${ANNOTATIONS.pause} annotation`;
  const hold = stopGate({ obs, memory: stallMemory(qc, obs), target: nodeId - 1, removing: true, opts: gateOptions(deps, obs, obs.minReadySeconds) });
  return hold?.reason ?? null;
}

export function membershipActivities(deps: ActivityDeps) {
  return {
    /** Adds a node as a learner with the addresses of its pod; a no-op once it is a member. */
    async addLearnerNode(ref: ClusterRef, nodeId: number, phase: Phase): Promise<void> {
      await holdUntil<true>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const spec = withDefaults(qc.spec);
        const obs = await observeCluster(deps, qc);
        const what = `adding node ${nodeId} as a learner`;
        if (!obs.membership) return { hold: { phase, message: `${what}: waiting for a leader's view of the membership`, gate: 'leader-known' } };
        if (memberOf(obs.membership, nodeId)) return { done: true };
        if (holdsOldData(obs, nodeId)) {
          // The broker contract forbids it; the steps before this one give the pod an empty volume.
          throw ApplicationFailure.nonRetryable(
            `${what}: pod ${ordinalOf(nodeId)} holds the data node ${nodeId} had before it left the membership, and a node never comes back with its old data: delete the volume claim of pod ${ordinalOf(nodeId)} and its pod`,
            'Refused',
          );
        }
        const host = podHost(qc, spec, ordinalOf(nodeId));
        const c = await changeThroughLeader(deps, qc, obs, phase, what, nodeId, (base, token) =>
          addLearner(base, { id: nodeId, raft: `${host}:${spec.raftPort}`, http: `${host}:${spec.port}` }, token),
        );
        if ('hold' in c) return c;
        await stepEvent(deps, qc, 'AddLearner', what);
        await mirrorMembership(deps, qc, { ...obs, membership: c.membership });
        return { done: true };
      });
    },

    /** Promotes learners in one change, once every one of them is live and caught up. */
    async promoteNodes(ref: ClusterRef, nodeIds: number[], phase: Phase): Promise<void> {
      // The change was sent and its answer lost (the leader stopped between the two steps, and the
      // change was finished from its joint configuration): the step still happened.
      let sent = false;
      await holdUntil<true>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const obs = await observeCluster(deps, qc);
        const m = obs.membership;
        const what = `promoting ${idsText(nodeIds)} to voters`;
        if (!m) return { hold: { phase, message: `${what}: waiting for a leader's view of the membership`, gate: 'leader-known' } };
        const pending = nodeIds.filter((id) => !memberOf(m, id)?.voter);
        if (pending.length === 0) {
          if (sent) await stepEvent(deps, qc, 'Promote', what);
          return { done: true };
        }
        for (const id of pending) {
          const member = memberOf(m, id);
          if (!member || !member.live || member.lag === null || member.lag > m.promoteMaxLag) {
            const lookAgainAt = catchUpLookAgainAt(m, Date.now(), pending);
            return { hold: { phase, message: `learner ${id} is catching up${lagText(member?.lag)}`, gate: 'learner-caught-up', lookAgainAt } };
          }
        }
        if (m.changeInFlight || m.joint) return { hold: { phase, message: `${what}: a membership change is in flight`, gate: 'no-change-in-flight', lookAgainAt: inFlightLookAgainAt(qc.metadata.uid ?? '', m) } };
        sent = true;
        const c = await changeThroughLeader(deps, qc, obs, phase, what, pending[0]!, (base, token) => promote(base, pending, token));
        if ('hold' in c) return c;
        sent = false;
        await stepEvent(deps, qc, 'Promote', what);
        await mirrorMembership(deps, qc, { ...obs, membership: c.membership });
        return { done: true };
      });
    },
  };
}

/** What a removal does when the cluster as it is now says it should not go on (yet). */
export interface LeaveRules<R> {
  nodeId: number;
  phase: Phase;
  /** The result once the node is not a member. */
  removed: R;
  /** Ends the step before anything else is looked at (the node leads, the request went away). */
  exits: (qc: QueenCluster, obs: Observation, m: NonNullable<Observation['membership']>) => R | null;
  /** The removal gate, once no change is in flight: an end of the step, or a hold to wait out. */
  gate: (qc: QueenCluster, obs: Observation) => Promise<{ done: R } | { hold: Hold } | null>;
  /** The pods of nodes that leave right after this one, drained with its pod (one drain wait for all). */
  companions?: (qc: QueenCluster, obs: Observation) => DrainTarget[];
}

/**
 * The one way a node leaves the membership: its pod is drained first (activities/drain.ts: out of
 * the client Services, the requests in flight finished), then the leader is asked to remove it.
 * The drained pod goes back in the client Services whenever the node does not leave after all
 * (the gate closed, the node leads, the request went away), and so do its companions (the pods of
 * the nodes that leave next, drained with it). A change sent whose answer was lost still counts:
 * the node is gone at the next look, and the Event says it was removed.
 */
export async function leaveAfterDrain<R>(deps: ActivityDeps, ref: ClusterRef, rules: LeaveRules<R>): Promise<R> {
  const { nodeId, phase } = rules;
  const what = `removing node ${nodeId} from the membership`;
  let sent = false;
  // The pod drained by this attempt (its UID): the removal goes only once it is.
  let drained: DrainTarget | null = null;
  let companions: DrainTarget[] = [];
  const undrain = async () => {
    for (const pod of [...(drained ? [drained] : []), ...companions]) await setServing(deps.kube, ref.namespace, pod, true);
    drained = null;
    companions = [];
  };
  type Look = { result: R } | { drain: DrainTarget; with: DrainTarget[]; qc: QueenCluster; obs: Observation };
  /** The change through the leader, on the cluster as a look has just seen it and let it go. */
  const send = async (qc: QueenCluster, obs: Observation): Promise<{ done: { result: R } } | { hold: Hold }> => {
    sent = true;
    const c = await changeThroughLeader(deps, qc, obs, phase, what, nodeId, (base, token) => removeMember(base, nodeId, token));
    if ('hold' in c) return c;
    sent = false;
    await stepEvent(deps, qc, 'RemoveMember', what);
    await mirrorMembership(deps, qc, { ...obs, membership: c.membership });
    return { done: { result: rules.removed } };
  };
  for (;;) {
    // A wait that parks (for a person) leaves no pod drained behind it.
    const look = await holdUntil<Look>(deps, ref, async () => {
      const qc = await loadCluster(deps, ref);
      const obs = await observeCluster(deps, qc);
      const m = obs.membership;
      if (!m) return { hold: { phase, message: `${what}: waiting for a leader's view of the membership`, gate: 'leader-known' } };
      if (!memberOf(m, nodeId)) {
        if (sent) await stepEvent(deps, qc, 'RemoveMember', what);
        // Left before (an attempt whose process is gone): status may still count it a voter.
        if (qc.status?.voters?.includes(nodeId)) await mirrorMembership(deps, qc, obs);
        return { done: { result: rules.removed } };
      }
      const exit = rules.exits(qc, obs, m);
      if (exit !== null) return { done: { result: exit } };
      if (m.changeInFlight || m.joint) return { hold: { phase, message: `${what}: a membership change is in flight`, gate: 'no-change-in-flight', lookAgainAt: inFlightLookAgainAt(qc.metadata.uid ?? '', m) } };
      const gated = await rules.gate(qc, obs);
      if (gated) {
        await undrain();
        return 'done' in gated ? { done: { result: gated.done } } : gated;
      }
      const pod = drainTarget(obs, nodeId - 1);
      if (pod && pod.uid !== drained?.uid) return { done: { drain: pod, with: rules.companions?.(qc, obs).filter((c) => c.uid !== pod.uid) ?? [], qc, obs } };
      return send(qc, obs);
    }).catch(async (err: unknown) => {
      if (err instanceof Parking) await undrain();
      throw err;
    });
    if ('drain' in look) {
      await undrain();
      // "taking pod 4 out of the client Service before node 5 leaves the membership"; with the pods
      // of the nodes that leave next: "taking pods 3 and 4 ... before nodes 5 and 4 leave the membership".
      const pods = [look.drain, ...look.with];
      const event = drainEvent(pods, `${nodesLeave(pods)} the membership`);
      const present = await drainPods(deps, ref, pods, { phase, what, event });
      companions = present.filter((p) => p.uid !== look.drain.uid);
      if (!present.some((p) => p.uid === look.drain.uid)) continue;
      drained = look.drain;
      // A pod no client could reach (drained with the node that left before it) was only labelled:
      // the look that let the removal go is a moment old, and the change goes now. After a drain
      // wait the gate is looked at again first.
      if (!present.waited) {
        const now = await send(look.qc, look.obs);
        if ('done' in now) return now.done.result;
      }
      continue;
    }
    if (look.result !== rules.removed) await undrain();
    return look.result;
  }
}
