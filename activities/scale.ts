// The steps of ScaleVoters that are not membership changes: waiting for the next step (a removal
// waits for the stop gate here, where the wait can be cancelled or yield), the pod count of the
// StatefulSet, the claims of pods that are gone for good, and the volume of a pod that holds the
// data of a node that left the membership.
import { ApplicationFailure } from '@temporalio/common';
import { withDefaults } from '../crd/defaults.ts';
import { catchUpLookAgainAt, handsOffBeforeLeaving, nextVoterStep, type ClaimToDelete, type VolumeToWipe, type VoterStep, wipeLine } from '../plan/voters.ts';
import { podsText } from '../plan/format.ts';
import type { Phase } from '../crd/schema.ts';
import { loadCluster, observeCluster, opLogger, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { holdUntil, type Hold } from './waits.ts';
import { drainPods, leavingPods, serveAgain, type DrainTarget } from './drain.ts';
import { applyObject, deleteClaimByUid, deletePodByUid, getPod, getStatefulSet } from './kube.ts';
import { inFlightLookAgainAt, leaveAfterDrain, removalHeld, removalHold } from './membership.ts';
import { keptShape, names, parseOrdinal, statefulSet } from './resources.ts';

export type ActionableVoterStep = Exclude<VoterStep, { kind: 'wait' }>;

export function scaleActivities(deps: ActivityDeps) {
  /**
   * Deletes each claim (the UID observed), drains the pods still in the client Services side by
   * side, then deletes each pod (its UID), so the StatefulSet makes both again, empty.
   */
  async function wipeVolumes(ref: ClusterRef, volumes: VolumeToWipe[]): Promise<void> {
    const qc = await loadCluster(deps, ref);
    const deleted = new Set<string>();
    for (const v of volumes) if (await deleteClaimByUid(deps.kube, ref.namespace, v.claimName, v.claimUid)) deleted.add(v.claimUid);
    // Their nodes are not members: pods still in the client Services leave them before they go.
    const targets: DrainTarget[] = [];
    for (const v of volumes) {
      const pod = await getPod(deps.kube, ref.namespace, v.podName);
      if (pod?.metadata?.uid === v.podUid && !pod.metadata?.deletionTimestamp) targets.push({ ordinal: v.ordinal, name: v.podName, uid: v.podUid, ip: pod.status?.podIP ?? null });
    }
    if (targets.length > 0) {
      const what = wipeLine(volumes);
      const event = `taking ${podsText(targets.map((t) => t.ordinal))} out of the client Service before ${targets.length === 1 ? 'it is' : 'they are'} deleted`;
      await drainPods(deps, ref, targets, { phase: 'Scaling', what, event });
    }
    for (const v of volumes) await deletePodByUid(deps.kube, ref.namespace, v.podName, v.podUid);
    for (const v of volumes) if (deleted.has(v.claimUid)) await stepEvent(deps, qc, 'WipeVolume', v.message);
  }

  /**
   * One look for the next step towards spec.replicas voters (read again each time, from the API
   * server): the step, or what holds it.
   */
  async function lookForVoterStep(ref: ClusterRef): Promise<{ done: ActionableVoterStep } | { hold: Hold }> {
    const qc = await loadCluster(deps, ref);
    const obs = await observeCluster(deps, qc);
    const wanted = withDefaults(qc.spec).replicas;
    // Nothing is drained while this waits: a pod drained for a removal that did not happen serves
    // again, but for the pods of the nodes this scale-down removes (drained together).
    await serveAgain(deps, ref, obs, wanted);
    const s = nextVoterStep(obs, wanted);
    if (s.kind === 'wait') {
      const m = obs.membership;
      let lookAgainAt: number | undefined;
      if (s.gate === 'learner-caught-up') lookAgainAt = catchUpLookAgainAt(m, Date.now());
      if (s.gate === 'no-change-in-flight' && m) lookAgainAt = inFlightLookAgainAt(qc.metadata.uid ?? '', m);
      return { hold: { phase: 'Scaling', message: s.message, gate: s.gate, lookAgainAt } };
    }
    if (s.kind === 'remove-member') {
      const hold = await removalHold(deps, qc, obs, s.nodeId, 'Scaling');
      if (hold) return { hold };
    }
    return { done: s };
  }

  /**
   * The step after the one just taken, when one look now finds it with nothing holding it: the
   * workflow takes it without a wait of its own (one look, not two, between two steps). Null when a
   * gate holds it or the look failed: the workflow's wait (awaitVoterStep) says what holds it.
   */
  async function stepNow(ref: ClusterRef): Promise<ActionableVoterStep | null> {
    try {
      const r = await lookForVoterStep(ref);
      return 'done' in r ? r.done : null;
    } catch (err) {
      opLogger(deps, ref).info({ err: String(err) }, 'no look at the next step towards the voters wanted: the wait for it looks again');
      return null;
    }
  }

  return {
    /** Waits until there is a step to take towards spec.replicas voters (read again each time). */
    async awaitVoterStep(ref: ClusterRef): Promise<ActionableVoterStep> {
      return holdUntil<ActionableVoterStep>(deps, ref, () => lookForVoterStep(ref));
    },

    /**
     * Takes a node that does not lead out of the membership; a no-op once it is not a member.
     * `held` when the removal gate closed since the wait for it (the operation waits again). An
     * object, so that the gates that held the step are in its result (worker.ts timeSteps); runs
     * recorded before answered the outcome alone (workflows/scale-voters.ts reads both). Once the
     * node is out, `next` is the step after it when nothing holds that one (stepNow).
     */
    async removeNode(ref: ClusterRef, nodeId: number, phase: Phase): Promise<{ outcome: 'removed' | 'leads' | 'held'; next?: ActionableVoterStep }> {
      const log = opLogger(deps, ref);
      const outcome = await leaveAfterDrain<'removed' | 'leads' | 'held'>(deps, ref, {
        nodeId,
        phase,
        removed: 'removed',
        exits: (_qc, _obs, m) => (handsOffBeforeLeaving(m, nodeId) ? 'leads' : null),
        gate: async (qc, obs) => {
          const held = removalHeld(deps, qc, obs, nodeId);
          if (!held) return null;
          log.info(`not removing node ${nodeId} yet: ${held}`);
          return { done: 'held' };
        },
        // The other nodes above the voters wanted leave right after this one: their pods go out of
        // the client Services now, in the same drain wait, a leader's among them (it is stopped
        // once to hand leadership away first, with no drain wait of its own then).
        companions: (qc, obs) => leavingPods(qc, obs, nodeId),
      });
      const next = outcome === 'removed' ? await stepNow(ref) : null;
      return { outcome, ...(next ? { next } : {}) };
    },

    /** Sets the StatefulSet's pod count, with the peer list for that count (the template's hash stays). */
    async scalePods(ref: ClusterRef, pods: number, message: string): Promise<void> {
      const qc = await loadCluster(deps, ref);
      const live = await getStatefulSet(deps.kube, ref.namespace, names.statefulSet(ref.name));
      if (!live || live.metadata?.deletionTimestamp) {
        throw ApplicationFailure.nonRetryable(`the StatefulSet ${ref.name} is missing: the cluster has to be formed again`, 'NoStatefulSet');
      }
      await applyObject(deps.kube, statefulSet(qc, { ...keptShape(live, withDefaults(qc.spec)), pods }));
      await stepEvent(deps, qc, 'ScalePods', message);
    },

    /**
     * Gives the pods of nodes that left the membership empty volumes, all in one step (plan/voters.ts
     * wipeOldData says why together). One Event a volume.
     */
    async wipeClaims(ref: ClusterRef, volumes: VolumeToWipe[]): Promise<void> {
      await wipeVolumes(ref, volumes);
    },

    /** One volume a step, as histories recorded before wipeClaims have it. */
    async wipeClaim(ref: ClusterRef, step: Omit<VolumeToWipe, 'nodeId' | 'ordinal'> & { ordinal?: number }): Promise<void> {
      const ordinal = step.ordinal ?? parseOrdinal(ref.name, step.podName);
      await wipeVolumes(ref, [{ ...step, ordinal, nodeId: ordinal + 1 }]);
    },

    /** Deletes the claim of a pod that is gone for good, if it is still the one observed (UID precondition). */
    async deleteClaim(ref: ClusterRef, claimName: string, claimUid: string, message: string): Promise<void> {
      const qc = await loadCluster(deps, ref);
      if (await deleteClaimByUid(deps.kube, ref.namespace, claimName, claimUid)) await stepEvent(deps, qc, 'DeleteClaim', message);
    },

    /**
     * Deletes the claims of pods that are gone for good, each if it is still the one observed (UID
     * precondition), each with its Event, in the order of their pods (kubectl describe lists them so).
     */
    async deleteClaims(ref: ClusterRef, claims: ClaimToDelete[]): Promise<{ next?: ActionableVoterStep }> {
      const qc = await loadCluster(deps, ref);
      for (const c of claims) {
        if (await deleteClaimByUid(deps.kube, ref.namespace, c.claimName, c.claimUid)) await stepEvent(deps, qc, 'DeleteClaim', c.message);
      }
      const next = await stepNow(ref);
      return next ? { next } : {};
    },
  };
}
