// The steps of RollingUpgrade: apply the new template (the StatefulSet is OnDelete, so that
// restarts nothing), then one pod at a time: wait for the stop gate, restart the pod.
import { heartbeat, sleep } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { withDefaults } from '../crd/defaults.ts';
import { ANNOTATIONS, type QueenCluster } from '../crd/schema.ts';
import { podsText, listText } from '../workflows/plan/format.ts';
import { stopGate, type GateOptions } from '../workflows/plan/gates.ts';
import type { Observation } from '../workflows/plan/observation.ts';
import { nextRestart, outdatedPods, type RestartPick } from '../workflows/plan/restarts.ts';
import { stallMemoryFromStatus, trackStalls, type StallMemory } from '../workflows/plan/stalls.ts';
import {
  holdUntil,
  loadCluster,
  observeCluster,
  opLogger,
  probeThrough,
  stepEvent,
  writeStep,
  type ActivityDeps,
  type ClusterRef,
} from './common.ts';
import { applyObject, deletePodByUid, getPod, getStatefulSet, patchClusterStatus } from './kube.ts';
import { disruptionBudget, names, podTemplate, services, specHash, statefulSet } from './resources.ts';
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

function gateOptions(deps: ActivityDeps, obs: Observation, minReadySeconds: number): GateOptions {
  return {
    minReadyMs: minReadySeconds * 1000,
    stallAfterMs: deps.settings.stallAfterMs,
    caughtUpEntries: Math.min(deps.settings.caughtUpEntries, obs.membership?.promoteMaxLag ?? Infinity),
  };
}

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
  /** The stall memory carried from one gate check to the next, seeded from status. */
  const memories = new Map<string, StallMemory>();
  const memoryFor = (qc: QueenCluster, obs: Observation) => {
    const key = `${qc.metadata.uid}`;
    const prev = memories.get(key) ?? stallMemoryFromStatus(qc.status?.members, obs.at);
    const next = trackStalls(prev, obs.membership, obs.at);
    memories.set(key, next);
    return next;
  };

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
      const pods = live.spec?.replicas ?? spec.replicas;
      const claimSize = (live.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage as string | undefined) ?? spec.storage.size;
      const before = live.spec?.template.metadata?.annotations?.[ANNOTATIONS.configHash];
      for (const obj of [...services(qc), disruptionBudget(qc)]) await applyObject(deps.kube, obj);
      await applyObject(deps.kube, statefulSet(qc, { pods, claimSize }));
      const { hash } = podTemplate(qc, pods);
      if (before !== hash) {
        await stepEvent(deps, qc, 'UpdateTemplate', `the pod template now runs ${spec.image}:${spec.version}; pods restart one at a time`);
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
        const memory = memoryFor(qc, obs);
        const pick = nextRestart(obs);
        if (!pick) return { done: { kind: 'done' } };
        const next = `pod ${pick.ordinal} is next`;
        if (qc.metadata.annotations?.[ANNOTATIONS.pause]) {
          return { hold: { phase: 'Upgrading', message: `${next}: paused by the ${ANNOTATIONS.pause} annotation`, gate: 'not-paused' } };
        }
        const hold = stopGate({ obs, memory, target: pick.ordinal, opts: gateOptions(deps, obs, obs.minReadySeconds) });
        if (hold) return { hold: { phase: 'Upgrading', message: `${next}: ${hold.reason}`, gate: hold.gate } };
        const probe = await probeThrough(deps, qc, obs, pick.ordinal);
        await patchClusterStatus(deps.kube, ref.namespace, ref.name, {
          commits: probe.ok,
          lastProbeTime: new Date().toISOString(),
          lastProbeError: probe.ok ? null : probe.error,
        });
        if (!probe.ok) return { hold: { phase: 'Upgrading', message: `${next}, but a write does not commit: ${probe.error}`, gate: 'write-commits' } };
        return { done: { kind: 'restart', pick, specHash: wanted } };
      });
    },

    /**
     * Restarts one pod: checks the stop gate once more, deletes the pod with a UID precondition
     * (a retry never stops its successor) and returns once the StatefulSet has made the successor.
     */
    async restartPod(ref: ClusterRef, pick: RestartPick): Promise<{ restarted: boolean; reason?: string }> {
      const qc = await loadCluster(deps, ref);
      const log = opLogger(deps, ref);
      const current = await getPod(deps.kube, ref.namespace, pick.podName);
      if (current && current.metadata?.uid === pick.podUid && !current.metadata?.deletionTimestamp) {
        const obs = await observeCluster(deps, qc);
        const hold = stopGate({ obs, memory: memoryFor(qc, obs), target: pick.ordinal, opts: gateOptions(deps, obs, obs.minReadySeconds) });
        if (hold) {
          log.info({ gate: hold.gate }, `not restarting pod ${pick.ordinal}: ${hold.reason}`);
          return { restarted: false, reason: hold.reason };
        }
        const message = `restarting pod ${pick.ordinal}`;
        await writeStep(deps, ref, { phase: 'Upgrading', message, gate: null });
        if (await deletePodByUid(deps.kube, ref.namespace, pick.podName, pick.podUid)) {
          log.info({ pod: pick.podName, uid: pick.podUid, why: pick.why }, message);
          await stepEvent(deps, qc, 'RestartPod', message);
        }
      }
      // The StatefulSet controller makes the successor once the old pod is gone.
      for (;;) {
        const pod = await getPod(deps.kube, ref.namespace, pick.podName);
        if (pod && pod.metadata?.uid !== pick.podUid) return { restarted: true };
        heartbeat({ waitingFor: `the successor of ${pick.podName}` });
        await sleep(Math.min(deps.settings.pollMs, 1000));
      }
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
        const hold = stopGate({ obs, memory: memoryFor(qc, obs), target: null, opts: { ...gateOptions(deps, obs, 0), minReadyMs: 0 } });
        let reason = hold?.reason ?? null;
        if (!reason) {
          const probe = await probeThrough(deps, qc, obs, null);
          await patchClusterStatus(deps.kube, ref.namespace, ref.name, {
            commits: probe.ok,
            lastProbeTime: new Date().toISOString(),
            lastProbeError: probe.ok ? null : probe.error,
          });
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
