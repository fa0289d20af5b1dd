// The steps of FormCluster: the objects, a leader, the voters, a committed write.
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { withDefaults } from '../crd/defaults.ts';
import type { QueenCluster } from '../crd/schema.ts';
import { assess } from '../plan/assess.ts';
import { memberOf, type Observation, podAt } from '../plan/observation.ts';
import { stallMemoryFromStatus } from '../plan/stalls.ts';
import { loadCluster, observeCluster, opLogger, probeThrough, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { holdUntil } from './waits.ts';
import { recordProbe } from './gate.ts';
import { applyObjectsBesideStatefulSet } from './apply.ts';
import { applyObject, getStatefulSet, listPods, patchClusterStatus, readObject } from './kube.ts';
import { clusterObjects, keptShape, names, parseOrdinal, statefulSet } from './resources.ts';
import { observedStatus } from './status.ts';
import { inFlightLookAgainAt } from './membership.ts';
import { sourceName } from '../plan/link.ts';

/** An object of ours must carry a controller reference to this QueenCluster; anything else is someone else's. */
function foreign(obj: KubernetesObject | null, qc: QueenCluster): boolean {
  if (!obj) return false;
  return !obj.metadata?.ownerReferences?.some((o) => o.controller && o.uid === qc.metadata.uid);
}

export interface AppliedObjects {
  created: boolean;
  pods: number;
}

/** How many pods a new StatefulSet gets: the voters, or more if pods of this cluster already run above them. */
function podsAtCreation(qc: QueenCluster, pods: V1Pod[]): number {
  const spec = withDefaults(qc.spec);
  const highest = Math.max(-1, ...pods.map((p) => parseOrdinal(qc.metadata.name, p.metadata?.name ?? '')));
  return Math.max(spec.replicas, highest + 1);
}

/**
 * The StatefulSet went while the formation waits for its pods (deleted by hand): no pod will come.
 * The operation stops (NoStatefulSet) and is started again, which applies the objects again.
 */
function statefulSetStays(obs: Observation, ref: ClusterRef): void {
  if (!obs.statefulSet || obs.statefulSet.terminating) {
    throw ApplicationFailure.nonRetryable(`the StatefulSet ${ref.name} was deleted while the cluster formed`, 'NoStatefulSet');
  }
}

export function formActivities(deps: ActivityDeps) {
  return {
    /**
     * The Services, the disruption budget and the StatefulSet, with server-side apply. An object
     * of the same name that this operator did not create is not taken over: Blocked, with its name.
     */
    async applyClusterObjects(ref: ClusterRef, restore?: { forceRecover: number }): Promise<AppliedObjects> {
      return holdUntil<AppliedObjects>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const spec = withDefaults(qc.spec);
        const wanted: KubernetesObject[] = clusterObjects(qc);
        const [existingSts, ...lives] = await Promise.all([
          getStatefulSet(deps.kube, ref.namespace, names.statefulSet(ref.name)),
          ...wanted.map((obj) => readObject(deps.kube, obj.apiVersion!, obj.kind!, ref.namespace, obj.metadata!.name!)),
        ]);
        // The first object that is not ours is named: the ones beside the StatefulSet, then the StatefulSet.
        const livesInOrder = [...lives, existingSts];
        const theirs = [...wanted, { kind: 'StatefulSet', metadata: { name: names.statefulSet(ref.name) } }].find((obj, i) => foreign(livesInOrder[i] ?? null, qc));
        if (theirs) {
          return {
            hold: {
              phase: 'Blocked',
              gate: 'objects-ours',
              message: `a ${theirs.kind} named ${theirs.metadata!.name} already exists in namespace ${ref.namespace} and this operator did not create it: remove it, or give the QueenCluster another name`,
            },
          };
        }
        if (existingSts?.metadata?.deletionTimestamp) {
          return { hold: { phase: 'Forming', gate: 'statefulset-deleted', message: `waiting for the old StatefulSet ${ref.name} to be deleted` } };
        }
        await applyObjectsBesideStatefulSet(deps, ref, qc);
        // A restore's first boot (workflows/restore-cluster.ts): pod 0 alone, recovering as a cluster of one.
        const shape = existingSts
          ? { ...keptShape(existingSts, spec), ...(restore ? { pods: 1, forceRecover: restore.forceRecover } : {}) }
          : restore
            ? { pods: 1, claimSize: spec.storage.size, forceRecover: restore.forceRecover }
            : { pods: podsAtCreation(qc, await listPods(deps.kube, ref.namespace, ref.name)), claimSize: spec.storage.size };
        const pods = shape.pods;
        await applyObject(deps.kube, statefulSet(qc, shape));
        await stepEvent(
          deps,
          qc,
          'ApplyObjects',
          existingSts
            ? `applied the Services, the disruption budget and the StatefulSet ${ref.name} (${pods} pods)`
            : `created the Services, the disruption budget and the StatefulSet ${ref.name} with ${pods} pods`,
        );
        return { done: { created: !existingSts, pods } };
      });
    },

    /** Waits for the pods to start and elect a leader; a Secret that is missing shows as Blocked meanwhile. */
    async awaitLeader(ref: ClusterRef): Promise<{ leader: number; term: number }> {
      return holdUntil<{ leader: number; term: number }>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const obs = await observeCluster(deps, qc);
        statefulSetStays(obs, ref);
        if (obs.membership?.leader != null) {
          await stepEvent(deps, qc, 'LeaderElected', `node ${obs.membership.leader} leads (term ${obs.membership.term})`);
          return { done: { leader: obs.membership.leader, term: obs.membership.term } };
        }
        const a = assess({
          obs,
          memory: {},
          formed: false,
          probe: null,
          stallAfterMs: deps.settings.stallAfterMs,
          secretName: qc.spec.secretName,
        });
        if (a.phase === 'Blocked') return { hold: { phase: 'Blocked', message: a.message, gate: a.reason ?? null } };
        const waiting = obs.pods.find((p) => p.unschedulable || p.waitingReason === 'CrashLoopBackOff');
        const seeding = waiting?.ordinal === 0 && !waiting.unschedulable && qc.spec.standby && qc.spec.standby.seed !== false;
        const detail = waiting?.unschedulable
          ? `: pod ${waiting.ordinal} cannot be scheduled: ${waiting.unschedulable}`
          : seeding
            ? `: pod 0 takes its first state from the source's snapshot and is crash-looping (exit code ${waiting.lastExitCode ?? 'unknown'}): ` +
              `the source ${sourceName(qc.spec, ref.namespace)} refuses it or does not answer; the link token is key ${qc.spec.standby!.tokenSecret.key} of Secret ${qc.spec.standby!.tokenSecret.name}`
            : waiting
              ? `: pod ${waiting.ordinal} is crash-looping (exit code ${waiting.lastExitCode ?? 'unknown'})`
              : '';
        return { hold: { phase: 'Forming', message: `waiting for the pods to start and elect a leader${detail}`, gate: 'leader-known' } };
      });
    },

    /** Waits until every voter of the membership is live and its pod Ready; records them in status. */
    async awaitVoters(ref: ClusterRef): Promise<number[]> {
      return holdUntil<number[]>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const obs = await observeCluster(deps, qc);
        statefulSetStays(obs, ref);
        const m = obs.membership;
        if (!m) return { hold: { phase: 'Forming', message: 'waiting for the pods to start and elect a leader', gate: 'leader-known' } };
        if (m.changeInFlight || m.joint) return { hold: { phase: 'Forming', message: 'a membership change is in flight', gate: 'no-change-in-flight', lookAgainAt: inFlightLookAgainAt(qc.metadata.uid ?? '', m) } };
        for (const id of m.voters) {
          const member = memberOf(m, id);
          if (!member?.live) return { hold: { phase: 'Forming', message: `waiting for the voters: the leader has not heard from node ${id}`, gate: 'voter-live' } };
          const pod = podAt(obs, id - 1);
          if (!pod?.ready) return { hold: { phase: 'Forming', message: `waiting for the voters: pod ${id - 1} is not Ready`, gate: 'pod-ready' } };
        }
        await patchClusterStatus(deps.kube, ref.namespace, ref.name, observedStatus(obs, stallMemoryFromStatus(undefined, obs.at)));
        await stepEvent(deps, qc, 'VotersLive', `voters [${m.voters.join(',')}] are live and Ready, node ${m.leader} leads`);
        return { done: m.voters };
      });
    },

    /** Waits until a write commits through one of the pods; COMMITS turns true. */
    async confirmWrite(ref: ClusterRef): Promise<number> {
      const log = opLogger(deps, ref);
      return holdUntil<number>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const obs = await observeCluster(deps, qc);
        statefulSetStays(obs, ref);
        const probe = await probeThrough(deps, qc, obs, null);
        await recordProbe(deps, ref, probe);
        if (probe.ok && probe.via !== undefined) {
          // A standby takes no write: what stands for one is its leader replaying its source.
          if (obs.link?.role === 'standby') await stepEvent(deps, qc, 'StandbyFollows', `the standby follows its source ${sourceName(qc.spec, ref.namespace)}: its leader, pod ${probe.via}, replays it`);
          else await stepEvent(deps, qc, 'WriteCommitted', `a write committed through pod ${probe.via}`);
          return { done: probe.via };
        }
        log.info({ error: probe.ok ? null : probe.error }, 'the write probe failed');
        return { hold: { phase: 'Forming', message: `waiting for a write to commit: ${probe.ok ? '' : probe.error}`, gate: 'write-commits' } };
      });
    },
  };
}
