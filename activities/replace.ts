// The steps of ReplaceNode, in the order that keeps the cluster whole: out of the membership first
// (a leader hands leadership away before), then the volume (the claim's UID recorded before
// anything is deleted, every delete guarded by it), then back in as a learner that copies
// everything from the leader, promoted once it has caught up.
import { readAnnotations, replaceRequest } from '../crd/annotations.ts';
import { ANNOTATIONS, type QueenCluster } from '../crd/schema.ts';
import { loadCluster, observeCluster, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { holdUntil } from './waits.ts';
import { deleteClaimByUid, deletePodByUid, getClaim, patchClusterAnnotations } from './kube.ts';
import { drainPod } from './drain.ts';
import { leaveAfterDrain, removalHold } from './membership.ts';
import { names, nodeIdOf } from './resources.ts';
import { liveClaimAt, podAt } from '../plan/observation.ts';
import { podStartProblem } from '../plan/assess.ts';
import { replacedVoterWait } from '../plan/progress.ts';
import { replaceLines } from '../plan/steps.ts';
import { handsOffBeforeLeaving } from '../plan/voters.ts';

export interface Replacement {
  pod: string;
  ordinal: number;
  nodeId: number;
  /** The claim the replacement started from: only this one is ever deleted. */
  claimUid: string;
}

export type Checked = { replacement: Replacement } | { abandoned: string };

/** The annotation still asks for this pod. */
const stillAsked = (qc: QueenCluster, pod: string) => readAnnotations(qc.metadata.annotations).replacePod === pod;

export function replaceActivities(deps: ActivityDeps) {
  return {
    /**
     * Checks the request and records the claim the replacement starts from. Blocked while the
     * pod is not a voter's, or is the only voter; abandoned if the annotation goes meanwhile.
     */
    async checkReplacement(ref: ClusterRef, pod: string): Promise<Checked> {
      return holdUntil<Checked>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        if (!stillAsked(qc, pod)) return { done: { abandoned: `the ${ANNOTATIONS.replacePod} annotation no longer names ${pod}` } };
        const obs = await observeCluster(deps, qc);
        // The watcher starts no replacement it refuses; the same check once more, on the cluster as
        // it is now (the leader's voters: during a scale-down the nodes above spec.replicas count).
        const asked = replaceRequest(qc, obs.statefulSet?.replicas ?? null, obs.membership?.voters ?? qc.status?.voters ?? null);
        if (!asked || 'refused' in asked) {
          return { hold: { phase: 'Blocked', message: asked?.refused ?? `the ${ANNOTATIONS.replacePod} annotation no longer names ${pod}`, gate: 'replace-target' } };
        }
        const { ordinal } = asked;
        if (!obs.membership) return { hold: { phase: 'Replacing', message: `replacing pod ${ordinal}: waiting for a leader's view of the membership`, gate: 'leader-known' } };
        const claim = liveClaimAt(obs, ordinal);
        if (!claim) return { hold: { phase: 'Replacing', message: `pod ${ordinal} has no volume claim to replace yet`, gate: 'claim-exists' } };
        await stepEvent(deps, qc, 'ReplaceStarted', replaceLines(ordinal, nodeIdOf(ordinal)).begin);
        return { done: { replacement: { pod, ordinal, nodeId: nodeIdOf(ordinal), claimUid: claim.uid } } };
      });
    },

    /**
     * Takes the node out of the membership (its pod drained first: leaveAfterDrain). Returns
     * `handOff` when it leads (its pod is stopped once first, through the stop gate), `abandoned`
     * when the annotation went before it left. An object, so that the gates that held the step are
     * in its result (worker.ts timeSteps); runs recorded before answered the outcome alone
     * (workflows/replace-node.ts reads both).
     */
    async leaveMembership(ref: ClusterRef, r: Replacement): Promise<{ outcome: 'left' | 'handOff' | 'abandoned' }> {
      const outcome = await leaveAfterDrain<'left' | 'handOff' | 'abandoned'>(deps, ref, {
        nodeId: r.nodeId,
        phase: 'Replacing',
        removed: 'left',
        exits: (qc, _obs, m) => (!stillAsked(qc, r.pod) ? 'abandoned' : handsOffBeforeLeaving(m, r.nodeId) ? 'handOff' : null),
        // The voters that stay must carry the cluster: the stop gate, the node's own stall excepted.
        gate: async (qc, obs) => removalHold(deps, qc, obs, r.nodeId, 'Replacing').then((hold) => (hold ? { hold } : null)),
      });
      return { outcome };
    },

    /**
     * Deletes the volume the replacement started from (its claim, with a UID precondition), and
     * the pod still running on it; waits until that claim is gone. A retry or a crash never
     * deletes the new volume: only the recorded UID is ever deleted.
     */
    async wipeVolume(ref: ClusterRef, r: Replacement): Promise<void> {
      let said = false;
      await holdUntil<true>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const obs = await observeCluster(deps, qc);
        const old = obs.claims.find((c) => c.uid === r.claimUid);
        if (!old) return { done: true };
        const message = replaceLines(r.ordinal, r.nodeId).wipe;
        if (!old.terminating && (await deleteClaimByUid(deps.kube, ref.namespace, names.claim(ref.name, r.ordinal), r.claimUid)) && !said) {
          await stepEvent(deps, qc, 'WipeVolume', message);
          said = true;
        }
        // The claim is held (pvc-protection) while a pod scheduled with it exists: that pod goes too,
        // running or not (one still waiting for the volume to be attached to its node holds it as
        // well, and could never mount a claim being deleted). A successor the scheduler cannot
        // place, for its claim is being deleted, holds nothing. One still in the client Services
        // leaves them first.
        // A pod made once the old claim was gone has (or gets) a new one: it is only deleted if the
        // old claim is still there when asked after the pod was seen (the look read pods and claims
        // side by side, and the StatefulSet makes no pod while its claim is being deleted).
        const pod = podAt(obs, r.ordinal);
        if (pod && !pod.terminating && !pod.unschedulable) {
          const still = await getClaim(deps.kube, ref.namespace, names.claim(ref.name, r.ordinal));
          if (still?.metadata?.uid !== r.claimUid) return { done: true };
          const words = { phase: 'Replacing' as const, what: message, event: `taking pod ${r.ordinal} out of the client Service before it is deleted` };
          await drainPod(deps, ref, { ordinal: r.ordinal, name: pod.name, uid: pod.uid, ip: pod.ip }, words);
          await deletePodByUid(deps.kube, ref.namespace, pod.name, pod.uid);
        }
        return { hold: { phase: 'Replacing', message: `waiting for the old volume of pod ${r.ordinal} to go`, gate: 'old-volume-gone' } };
      });
    },

    /** Waits for the pod to run again on a new volume, answering (not Ready: an empty node is not). */
    async awaitEmptyNode(ref: ClusterRef, r: Replacement): Promise<void> {
      await holdUntil<true>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const obs = await observeCluster(deps, qc);
        const pod = podAt(obs, r.ordinal);
        const claim = liveClaimAt(obs, r.ordinal);
        if (!obs.statefulSet || obs.statefulSet.terminating) {
          return { hold: { phase: 'Replacing', message: `the StatefulSet ${ref.name} is gone: the cluster has to be formed again before node ${r.nodeId} is added`, gate: 'statefulset-present' } };
        }
        if (pod && pod.running && !pod.terminating && obs.health[r.ordinal] && claim && claim.uid !== r.claimUid) return { done: true };
        const why = podStartProblem(pod);
        return { hold: { phase: 'Replacing', message: `waiting for pod ${r.ordinal} to start before node ${r.nodeId} is added${why ? `: ${why}` : ''}`, gate: 'pod-running' } };
      });
    },

    /** Once the node is a live voter and its pod Ready: the annotation goes, and the Event says so. */
    async finishReplacement(ref: ClusterRef, r: Replacement): Promise<void> {
      await holdUntil<true>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const obs = await observeCluster(deps, qc);
        const wait = replacedVoterWait(obs, r.ordinal, r.nodeId);
        if (wait) return { hold: { phase: 'Replacing', message: wait, gate: 'pod-ready' } };
        if (stillAsked(qc, r.pod)) await patchClusterAnnotations(deps.kube, ref.namespace, ref.name, { [ANNOTATIONS.replacePod]: null });
        await stepEvent(deps, qc, 'ReplaceFinished', replaceLines(r.ordinal, r.nodeId).done);
        return { done: true };
      });
    },
  };
}
