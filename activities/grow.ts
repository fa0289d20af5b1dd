// The steps of GrowVolumes: the claims ask for the new size; the StatefulSet, whose claim template
// cannot be edited, is deleted without its pods (orphan) and created again with the new size.
import { withDefaults } from '../crd/defaults.ts';
import { parseQuantity } from '../plan/format.ts';
import { nextVolumeStep, type ClaimToExpand, type VolumeStep } from '../plan/volumes.ts';
import { loadCluster, observeCluster, stepEvent, writeStep, type ActivityDeps, type ClusterRef } from './common.ts';
import { holdUntil, type Hold } from './waits.ts';
import type { QueenCluster } from '../crd/schema.ts';
import { apiErrorMessage, applyObject, getClaim, getStatefulSet, isConflict, isNotFound, statusCode } from './kube.ts';
import { names, statefulSet } from './resources.ts';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

export type ActionableVolumeStep = Exclude<VolumeStep, { kind: 'wait' }>;

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export function growActivities(deps: ActivityDeps) {
  const steps = {
    /**
     * Waits until there is a step to take towards volumes of spec.storage.size (read again each
     * time); `restarted`, the pods the grow restarted, are Ready again before it is done.
     */
    async awaitVolumeStep(ref: ClusterRef, restarted: number[] = []): Promise<ActionableVolumeStep> {
      return holdUntil<ActionableVolumeStep>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const spec = withDefaults(qc.spec);
        const obs = await observeCluster(deps, qc);
        const template = obs.statefulSet?.claimTemplateSize ? parseQuantity(obs.statefulSet.claimTemplateSize) : Infinity;
        const s = nextVolumeStep(obs, spec.storage.size, parseQuantity(spec.storage.size), template, restarted);
        if (s.kind === 'wait') return { hold: { phase: s.phase ?? 'Resizing', message: s.message, gate: s.gate } };
        return { done: s };
      });
    },

    /**
     * Asks every claim given for the new size, side by side: the storage grows them together. A
     * class that does not allow expansion answers through the status: Blocked with the API
     * server's words, tried again until it allows it (the claims it did grow stay grown).
     */
    async expandClaims(ref: ClusterRef, claims: ClaimToExpand[], size: string, _message: string): Promise<void> {
      await holdUntil<true>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        let first: Hold | null = null;
        for (const claim of claims) {
          const hold = await askForSize(deps, qc, claim, size);
          first ??= hold;
        }
        return first ? { hold: first } : { done: true };
      });
    },

    /** One claim a step: what a step recorded before expandClaims (a history replayed) runs. */
    async expandClaim(ref: ClusterRef, ordinal: number, claimName: string, claimUid: string, size: string, message: string): Promise<void> {
      await holdUntil<true>(deps, ref, async () => {
        const hold = await askForSize(deps, await loadCluster(deps, ref), { ordinal, claimName, claimUid, message }, size);
        return hold ? { hold } : { done: true };
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

    /**
     * The StatefulSet created again around its running pods with the new claim template, in one
     * step: deleted without its pods (deleteStatefulSetOrphan), then created with `pods` pods, or
     * as many as the one it replaces had.
     */
    async recreateStatefulSet(ref: ClusterRef, message: string, pods?: number): Promise<void> {
      const had = await steps.deleteStatefulSetOrphan(ref, message);
      await steps.createStatefulSet(ref, pods ?? had);
    },
  };
  return steps;
}

/**
 * Asks a claim (the UID observed) for a size: null once it asks for that much or is gone, with its
 * Event when this patch did it; else why not yet.
 */
async function askForSize(deps: ActivityDeps, qc: QueenCluster, claim: ClaimToExpand, size: string): Promise<Hold | null> {
  const namespace = qc.metadata.namespace!;
  const live = await getClaim(deps.kube, namespace, claim.claimName);
  if (!live || live.metadata?.uid !== claim.claimUid) return null;
  if (parseQuantity(String(live.spec?.resources?.requests?.storage ?? '0')) >= parseQuantity(size)) return null;
  try {
    await deps.kube.core.patchNamespacedPersistentVolumeClaim(
      { namespace, name: claim.claimName, body: { spec: { resources: { requests: { storage: size } } } } },
      mergePatch,
    );
  } catch (err) {
    const code = statusCode(err);
    if (code === 403 || code === 422) {
      return { phase: 'Blocked', message: `the volume of pod ${claim.ordinal} cannot grow: ${apiErrorMessage(err)}`, gate: 'volume-can-grow' };
    }
    if (isConflict(err)) return { phase: 'Resizing', message: claim.message, gate: 'volume-can-grow' };
    throw err;
  }
  await stepEvent(deps, qc, 'ExpandClaim', claim.message);
  return null;
}
