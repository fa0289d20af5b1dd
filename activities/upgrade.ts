// The steps of RollingUpgrade: apply the new template (the StatefulSet is OnDelete, so that
// restarts nothing), then one pod at a time: wait for the stop gate, restart the pod.
import { ApplicationFailure } from '@temporalio/common';
import { withDefaults } from '../crd/defaults.ts';
import { ANNOTATIONS } from '../crd/schema.ts';
import { listText, podsText } from '../workflows/plan/format.ts';
import { stopGate } from '../workflows/plan/gates.ts';
import type { Observation } from '../workflows/plan/observation.ts';
import { nextRestart, outdatedPods, type RestartPick } from '../workflows/plan/restarts.ts';
import { holdUntil, loadCluster, observeCluster, probeThrough, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { gateOptions, recordProbe, stallMemory, stopHold } from './gate.ts';
import { applyObject, deleteOwnedNetworkPolicy, getStatefulSet } from './kube.ts';
import { clusterObjects, imageRef, keptShape, names, networkPolicy, podTemplate, specHash, statefulSet } from './resources.ts';
import { podVersion } from './status.ts';

export interface AppliedTemplate {
  specHash: string;
  templateHash: string;
  version: string;
}

export type NextRestart =
  | { kind: 'done' }
  | { kind: 'retarget'; specHash: string }
  | { kind: 'restart'; pick: RestartPick; specHash: string };

/** Which pods run which version, e.g. "pod 2 runs 2.6.1, pods 0 and 1 run 2.6.0". */
export function versionsText(obs: Observation): string {
  const byVersion = new Map<string, number[]>();
  for (const p of obs.pods) {
    const v = podVersion(obs, p.ordinal) ?? 'an unknown version';
    byVersion.set(v, [...(byVersion.get(v) ?? []), p.ordinal]);
  }
  const parts = [...byVersion.entries()].map(([v, ords]) => `${podsText(ords.sort((a, b) => a - b))} ${ords.length === 1 ? 'runs' : 'run'} ${v}`);
  return listText(parts);
}

export function upgradeActivities(deps: ActivityDeps) {
  return {
    /**
     * Applies the pod template of the spec as it is now to the StatefulSet (its pod count and claim
     * template stay as they are), and the Services and the budget. OnDelete: no pod restarts.
     */
    async applyPodTemplate(ref: ClusterRef): Promise<AppliedTemplate> {
      const qc = await loadCluster(deps, ref);
      const spec = withDefaults(qc.spec);
      const live = await getStatefulSet(deps.kube, ref.namespace, names.statefulSet(ref.name));
      if (!live || live.metadata?.deletionTimestamp) {
        throw ApplicationFailure.nonRetryable(`the StatefulSet ${ref.name} is missing: the cluster has to be formed again`, 'NoStatefulSet');
      }
      const shape = keptShape(live, spec);
      const before = live.spec?.template.metadata?.annotations?.[ANNOTATIONS.configHash];
      for (const obj of clusterObjects(qc)) await applyObject(deps.kube, obj);
      if (!networkPolicy(qc)) await deleteOwnedNetworkPolicy(deps.kube, qc, names.networkPolicy(ref.name));
      await applyObject(deps.kube, statefulSet(qc, shape));
      const { hash } = podTemplate(qc, shape.pods);
      if (before !== hash) {
        await stepEvent(deps, qc, 'UpdateTemplate', `the pod template now runs ${imageRef(spec)}; pods restart one at a time`);
      }
      return { specHash: specHash(qc), templateHash: hash, version: spec.version };
    },

    /**
     * Waits until the next pod may stop: the not-Ready one on an old template first, then the
     * highest ordinal that does not lead, the leader last; every other voter Ready for
     * minReadySeconds, live and caught up, no voter stalled, not paused, and a write committing
     * through a pod that stays. Returns `done` when no pod runs an old template, and `retarget`
     * when the spec changed since the template was applied.
     */
    async awaitNextRestart(ref: ClusterRef, applied: { specHash: string }): Promise<NextRestart> {
      return holdUntil<NextRestart>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const wanted = specHash(qc);
        if (wanted !== applied.specHash) return { done: { kind: 'retarget', specHash: wanted } };
        const obs = await observeCluster(deps, qc);
        const pick = nextRestart(obs);
        if (!pick) return { done: { kind: 'done' } };
        const hold = await stopHold(deps, qc, obs, pick.ordinal, { phase: 'Upgrading', next: `pod ${pick.ordinal} is next` });
        if (hold) return { hold };
        return { done: { kind: 'restart', pick, specHash: wanted } };
      });
    },

    /**
     * After the last restart: waits until every voter is Ready, live and caught up and a write
     * commits. `again` when the spec changed or a pod runs an old template meanwhile. With
     * `stopping` (a cancel), pods on an old template are expected: it only waits for the cluster
     * to be whole again before the operation ends.
     */
    async awaitSettled(ref: ClusterRef, applied: { specHash: string; stopping?: boolean }): Promise<{ settled: boolean; again: boolean; reason?: string }> {
      const deadline = Date.now() + deps.settings.settleTimeoutMs;
      return holdUntil<{ settled: boolean; again: boolean; reason?: string }>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        if (!applied.stopping && specHash(qc) !== applied.specHash) return { done: { settled: false, again: true } };
        const obs = await observeCluster(deps, qc);
        if (!applied.stopping && outdatedPods(obs).length > 0) return { done: { settled: false, again: true } };
        const hold = stopGate({ obs, memory: stallMemory(qc, obs), target: null, opts: gateOptions(deps, obs, 0) });
        let reason = hold?.reason ?? null;
        if (!reason) {
          const probe = await probeThrough(deps, qc, obs, null);
          await recordProbe(deps, ref, probe);
          if (probe.ok) return { done: { settled: true, again: false } };
          reason = `a write does not commit: ${probe.error}`;
        }
        if (Date.now() > deadline) return { done: { settled: false, again: false, reason } };
        const waiting = applied.stopping ? 'stopping the upgrade once the cluster is whole' : 'every pod restarted; waiting for the cluster to settle';
        return { hold: { phase: 'Upgrading', message: `${waiting}: ${reason}`, gate: hold?.gate ?? 'write-commits' } };
      });
    },

    /** Which pods run which version now, for the status of a cancelled or yielded upgrade. */
    async describeVersions(ref: ClusterRef): Promise<string> {
      const qc = await loadCluster(deps, ref);
      return versionsText(await observeCluster(deps, qc));
    },
  };
}
