// The steps of a cluster formed from a backup (workflows/restore-cluster.ts): the backup checked
// ready, pod 0's claim made from its snapshot, and after node 1 recovered alone
// (QUEEN_RAFT_FORCE_RECOVER), the variable removed from the StatefulSet and pod 0 restarted
// without it, before any member joins: the broker refuses to boot with the variable still set once
// the membership grew again. The source cluster and its backup are only read.
import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { withDefaults } from '../crd/defaults.ts';
import type { RestoreStatus } from '../crd/schema.ts';
import { parseQuantity } from '../plan/format.ts';
import { podAt } from '../plan/observation.ts';
import { getBackup, getVolumeSnapshot, sizeText, SNAPSHOT_GROUP } from './backup.ts';
import { loadCluster, observeCluster, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { holdUntil } from './waits.ts';
import { applyObject, deletePodByUid, getClaim, getPod, getStatefulSet, isConflict, patchClusterStatus } from './kube.ts';
import { FORCE_RECOVER_ENV, keptShape, names, selectorLabels, statefulSet } from './resources.ts';

export interface RestoreSource {
  /** The QueenBackup named, if one was. */
  backup: string | null;
  volumeSnapshot: string;
  /** The snapshot's restoreSize, as the snapshot controller gives it (a quantity). */
  restoreSize: string | null;
  raftIndex: number | null;
  sourceCluster: string | null;
}

/** What a person does when the backup named cannot be restored: the field cannot change after creation. */
const NAME_ANOTHER = 'delete this QueenCluster (nothing was formed yet) and create it again naming a ready backup in spec.bootstrap.fromBackup';

const FORCE_RECOVER_NODE = 1;

export function restoreActivities(deps: ActivityDeps) {
  return {
    /**
     * Waits until the backup of spec.bootstrap.fromBackup is ready to restore from (a QueenBackup
     * Ready, its VolumeSnapshot readyToUse), and pod 0's claim is free to be made from it: Blocked
     * with the reason meanwhile (it goes on by itself once a backup being taken is ready).
     */
    async resolveRestoreSource(ref: ClusterRef): Promise<RestoreSource> {
      return holdUntil<RestoreSource>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const from = qc.spec.bootstrap?.fromBackup;
        if (!from?.name && !from?.volumeSnapshot) throw ApplicationFailure.nonRetryable('spec.bootstrap.fromBackup names no backup', 'Refused');
        const blocked = (message: string) => ({ hold: { phase: 'Blocked' as const, message, gate: 'backup-ready' as const } });
        let vsName = from.volumeSnapshot ?? '';
        let raftIndex: number | null = null;
        let sourceCluster: string | null = null;
        if (from.name) {
          const b = await getBackup(deps, ref.namespace, from.name);
          if (!b) return blocked(`the backup ${from.name} (spec.bootstrap.fromBackup) does not exist in namespace ${ref.namespace}: ${NAME_ANOTHER}`);
          if (b.status?.phase !== 'Ready' || b.status.readyToUse !== true || !b.status.volumeSnapshot) {
            const how = b.status?.phase ? `${b.status.phase}${b.status.message ? `: ${b.status.message}` : ''}` : 'not begun';
            return blocked(`the backup ${from.name} is not ready to restore from (${how}); the cluster forms once it is, or ${NAME_ANOTHER}`);
          }
          // The broker's forced recovery of a membership that has one voter already changes nothing, so
          // node 1 keeps the addresses its log registered: under another name those are the source's pod.
          if (b.status.voters?.length === 1 && b.spec.cluster !== ref.name) {
            return blocked(
              `the backup ${from.name} is of a cluster of one voter (${b.spec.cluster}): its node keeps the addresses of ${b.spec.cluster}'s pod 0, ` +
                `where the voters this cluster adds would go; restore it as ${b.spec.cluster} (once that cluster is deleted), or ${NAME_ANOTHER}`,
            );
          }
          vsName = b.status.volumeSnapshot;
          raftIndex = b.status.raftIndex ?? null;
          sourceCluster = b.spec.cluster;
        }
        const vs = await getVolumeSnapshot(deps, ref.namespace, vsName);
        if (!vs) return blocked(`the VolumeSnapshot ${vsName} does not exist in namespace ${ref.namespace}: ${NAME_ANOTHER}`);
        if (vs.status?.readyToUse !== true) {
          const err = vs.status?.error?.message;
          return blocked(`the VolumeSnapshot ${vsName} is not ready to restore from${err ? `: ${err}` : ''}; the cluster forms once it is, or ${NAME_ANOTHER}`);
        }
        const claimName = names.claim(ref.name, 0);
        const claim = await getClaim(deps.kube, ref.namespace, claimName);
        if (claim && claim.spec?.dataSource?.name !== vsName) {
          return blocked(
            `the claim ${claimName} exists already and was not made from the VolumeSnapshot ${vsName} (a cluster of this name left it): ` +
              `pod 0 would start on it instead of the backup; delete the claim, or restore under another name`,
          );
        }
        return { done: { backup: from.name ?? null, volumeSnapshot: vsName, restoreSize: sizeText(vs.status?.restoreSize) ?? null, raftIndex, sourceCluster } };
      });
    },

    /** Pod 0's claim, made from the snapshot (at least the snapshot's size); recorded in status.restore. */
    async createRestoreClaim(ref: ClusterRef, source: RestoreSource): Promise<string> {
      const qc = await loadCluster(deps, ref);
      const spec = withDefaults(qc.spec);
      const name = names.claim(ref.name, 0);
      const size = source.restoreSize && parseQuantity(source.restoreSize) > parseQuantity(spec.storage.size) ? source.restoreSize : spec.storage.size;
      const body: V1PersistentVolumeClaim = {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name, namespace: ref.namespace, labels: selectorLabels(ref.name) },
        spec: {
          accessModes: ['ReadWriteOnce'],
          ...(spec.storage.storageClassName ? { storageClassName: spec.storage.storageClassName } : {}),
          resources: { requests: { storage: size } },
          dataSource: { apiGroup: SNAPSHOT_GROUP, kind: 'VolumeSnapshot', name: source.volumeSnapshot },
        },
      };
      let claim: V1PersistentVolumeClaim;
      try {
        claim = await deps.kube.core.createNamespacedPersistentVolumeClaim({ namespace: ref.namespace, body });
      } catch (err) {
        if (!isConflict(err)) throw err;
        claim = await deps.kube.core.readNamespacedPersistentVolumeClaim({ namespace: ref.namespace, name });
        if (claim.spec?.dataSource?.name !== source.volumeSnapshot) {
          throw ApplicationFailure.nonRetryable(`the claim ${name} exists already and was not made from the VolumeSnapshot ${source.volumeSnapshot}`, 'Refused');
        }
      }
      const restore: RestoreStatus = {
        ...(source.backup ? { backup: source.backup } : {}),
        volumeSnapshot: source.volumeSnapshot,
        ...(source.sourceCluster ? { sourceCluster: source.sourceCluster } : {}),
        ...(source.raftIndex !== null ? { raftIndex: source.raftIndex } : {}),
        claimUid: claim.metadata!.uid!,
      };
      await patchClusterStatus(deps.kube, ref.namespace, ref.name, { restore });
      // (Once per step: an attempt after one that recorded it finds it.)
      const of = source.backup ? `the backup ${source.backup}${source.sourceCluster ? ` of ${source.sourceCluster}` : ''}${source.raftIndex !== null ? `, index ${source.raftIndex} at least` : ''}` : `the VolumeSnapshot ${source.volumeSnapshot}`;
      await stepEvent(deps, qc, 'RestoreClaim', `created the claim ${name} of pod 0 (${claim.spec?.resources?.requests?.storage ?? size}) from ${of}`);
      return claim.metadata!.uid!;
    },

    /**
     * Once node 1 leads alone (recovered with QUEEN_RAFT_FORCE_RECOVER), the StatefulSet's template
     * without the variable, and pod 0 restarted on it; done when pod 0 runs without it, Ready, node 1
     * the only voter and leading. status.restore.recoveredAt then says the recovery is over: no
     * later formation sets the variable again.
     */
    async finishForceRecovery(ref: ClusterRef): Promise<{ term: number; commit: number }> {
      let restarted = false;
      return holdUntil<{ term: number; commit: number }>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const spec = withDefaults(qc.spec);
        const sts = await getStatefulSet(deps.kube, ref.namespace, names.statefulSet(ref.name));
        if (!sts || sts.metadata?.deletionTimestamp) throw ApplicationFailure.nonRetryable(`the StatefulSet ${ref.name} was deleted while the cluster formed`, 'NoStatefulSet');
        const hasVariable = (env: { name: string }[] | undefined) => !!env?.some((e) => e.name === FORCE_RECOVER_ENV);
        if (hasVariable(sts.spec?.template?.spec?.containers?.[0]?.env)) {
          await applyObject(deps.kube, statefulSet(qc, { ...keptShape(sts, spec), pods: 1 }));
        }
        const obs = await observeCluster(deps, qc);
        const m = obs.membership;
        const pod = await getPod(deps.kube, ref.namespace, names.pod(ref.name, 0));
        if (pod && !pod.metadata?.deletionTimestamp && hasVariable(pod.spec?.containers?.[0]?.env)) {
          // Only once node 1 leads alone: its recovery is written to its volume then.
          if (!m || m.leader !== FORCE_RECOVER_NODE || m.voters.join() !== String(FORCE_RECOVER_NODE)) {
            return { hold: { phase: 'Forming', message: 'waiting for node 1 to recover alone from the backup (QUEEN_RAFT_FORCE_RECOVER=1)', gate: 'leader-known' } };
          }
          await deletePodByUid(deps.kube, ref.namespace, pod.metadata!.name!, pod.metadata!.uid!);
          if (!restarted) await stepEvent(deps, qc, 'RecoveredAlone', `node 1 recovered alone from the backup (term ${m.term}); restarting pod 0 without ${FORCE_RECOVER_ENV}`);
          restarted = true;
          return { hold: { phase: 'Forming', message: `restarting pod 0 without ${FORCE_RECOVER_ENV}`, gate: 'pod-ready' } };
        }
        const p0 = podAt(obs, 0);
        const health = obs.health[0];
        if (!p0 || p0.terminating || !p0.ready || !health || !m || m.leader !== FORCE_RECOVER_NODE) {
          return { hold: { phase: 'Forming', message: `waiting for pod 0 to be Ready without ${FORCE_RECOVER_ENV}, node 1 leading`, gate: 'pod-ready' } };
        }
        await patchClusterStatus(deps.kube, ref.namespace, ref.name, { restore: { ...(qc.status?.restore ?? {}), recoveredAt: new Date().toISOString() } });
        return { done: { term: health.term, commit: health.commit } };
      });
    },
  };
}
