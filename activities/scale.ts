// The steps of ScaleVoters that are not membership changes: waiting for the next step, the pod
// count of the StatefulSet, and the claims of pods that are gone for good.
import { ApplicationFailure } from '@temporalio/common';
import { withDefaults } from '../crd/defaults.ts';
import { nextVoterStep, type VoterStep } from '../workflows/plan/voters.ts';
import { holdUntil, loadCluster, observeCluster, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { applyObject, deleteClaimByUid, getStatefulSet } from './kube.ts';
import { keptShape, names, statefulSet } from './resources.ts';

export type ActionableVoterStep = Exclude<VoterStep, { kind: 'wait' }>;

export function scaleActivities(deps: ActivityDeps) {
  return {
    /** Waits until there is a step to take towards spec.replicas voters (read again each time). */
    async awaitVoterStep(ref: ClusterRef): Promise<ActionableVoterStep> {
      return holdUntil<ActionableVoterStep>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const obs = await observeCluster(deps, qc);
        const s = nextVoterStep(obs, withDefaults(qc.spec).replicas);
        if (s.kind === 'wait') return { hold: { phase: 'Scaling', message: s.message, gate: s.gate } };
        return { done: s };
      });
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

    /** Deletes the claim of a pod that is gone for good, if it is still the one observed (UID precondition). */
    async deleteClaim(ref: ClusterRef, claimName: string, claimUid: string, message: string): Promise<void> {
      const qc = await loadCluster(deps, ref);
      if (await deleteClaimByUid(deps.kube, ref.namespace, claimName, claimUid)) await stepEvent(deps, qc, 'DeleteClaim', message);
    },
  };
}
