// The steps of GrowVolumes: each claim asks for the new size; the StatefulSet, whose claim template
// cannot be edited, is deleted without its pods (orphan) and created again with the new size.
import { withDefaults } from '../crd/defaults.ts';
import { parseQuantity } from '../workflows/plan/format.ts';
import { nextVolumeStep, type VolumeStep } from '../workflows/plan/volumes.ts';
import { holdUntil, loadCluster, observeCluster, stepEvent, writeStep, type ActivityDeps, type ClusterRef } from './common.ts';
import { apiErrorMessage, applyObject, getStatefulSet, isConflict, isNotFound, statusCode } from './kube.ts';
import { names, statefulSet } from './resources.ts';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

export type ActionableVolumeStep = Exclude<VolumeStep, { kind: 'wait' }>;

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export function growActivities(deps: ActivityDeps) {
  return {
    /** Waits until there is a step to take towards volumes of spec.storage.size (read again each time). */
    async awaitVolumeStep(ref: ClusterRef): Promise<ActionableVolumeStep> {
      return holdUntil<ActionableVolumeStep>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const spec = withDefaults(qc.spec);
        const obs = await observeCluster(deps, qc);
        const template = obs.statefulSet?.claimTemplateSize ? parseQuantity(obs.statefulSet.claimTemplateSize) : Infinity;
        const s = nextVolumeStep(obs, spec.storage.size, parseQuantity(spec.storage.size), template);
        if (s.kind === 'wait') return { hold: { phase: s.phase ?? 'Resizing', message: s.message, gate: s.gate } };
        return { done: s };
      });
    },

    /**
     * Asks one claim for the new size. A class that does not allow expansion answers through the
     * status: Blocked with the API server's words, tried again until it allows it.
     */
    async expandClaim(ref: ClusterRef, ordinal: number, claimName: string, claimUid: string, size: string, message: string): Promise<void> {
      await holdUntil<true>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        let claim;
        try {
          claim = await deps.kube.core.readNamespacedPersistentVolumeClaim({ namespace: ref.namespace, name: claimName });
        } catch (err) {
          if (isNotFound(err)) return { done: true };
          throw err;
        }
        if (claim.metadata?.uid !== claimUid) return { done: true };
        if (parseQuantity(String(claim.spec?.resources?.requests?.storage ?? '0')) >= parseQuantity(size)) return { done: true };
        try {
          await deps.kube.core.patchNamespacedPersistentVolumeClaim(
            { namespace: ref.namespace, name: claimName, body: { spec: { resources: { requests: { storage: size } } } } },
            mergePatch,
          );
        } catch (err) {
          const code = statusCode(err);
          if (code === 403 || code === 422) {
            return { hold: { phase: 'Blocked', message: `the volume of pod ${ordinal} cannot grow: ${apiErrorMessage(err)}`, gate: 'volume-can-grow' } };
          }
          if (isConflict(err)) return { hold: { phase: 'Resizing', message, gate: 'volume-can-grow' } };
          throw err;
        }
        await stepEvent(deps, qc, 'ExpandClaim', message);
        return { done: true };
      });
    },

    /**
     * Deletes the StatefulSet without its pods (they keep running) and waits until it is gone;
     * returns its pod count, for the one created again.
     */
    async deleteStatefulSetOrphan(ref: ClusterRef, message: string): Promise<number> {
      let pods: number | null = null;
      // Said before the StatefulSet goes: its absence is this operation's doing, not a cluster to form again.
      await writeStep(deps, ref, { phase: 'Resizing', message, gate: 'statefulset-recreated' });
      return holdUntil<number>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const live = await getStatefulSet(deps.kube, ref.namespace, names.statefulSet(ref.name));
        if (!live) return { done: pods ?? withDefaults(qc.spec).replicas };
        pods ??= live.spec?.replicas ?? withDefaults(qc.spec).replicas;
        if (!live.metadata?.deletionTimestamp) {
          try {
            await deps.kube.apps.deleteNamespacedStatefulSet({
              namespace: ref.namespace,
              name: live.metadata!.name!,
              body: { propagationPolicy: 'Orphan', preconditions: { uid: live.metadata!.uid! } },
            });
            await stepEvent(deps, qc, 'RecreateStatefulSet', message);
          } catch (err) {
            if (!isNotFound(err) && !isConflict(err)) throw err;
          }
        }
        return { hold: { phase: 'Resizing', message: `${message}: waiting for the old StatefulSet to be deleted`, gate: 'statefulset-recreated' } };
      });
    },

    /** Creates the StatefulSet again, its claim template of the new size, around the running pods. */
    async createStatefulSet(ref: ClusterRef, pods: number): Promise<void> {
      const qc = await loadCluster(deps, ref);
      await applyObject(deps.kube, statefulSet(qc, { pods, claimSize: withDefaults(qc.spec).storage.size }));
    },
  };
}
