// The steps of a backup (workflows/backup.ts): the QueenBackup, the wait for a moment the cluster
// is at rest with a caught-up voter, the VolumeSnapshot of that voter's volume, the wait for it to
// be ready, and the deletion of scheduled backups past spec.backup.keep. A backup writes its own
// status (the QueenBackup's), never the QueenCluster's phase: it is not one of the cluster's
// operations and runs beside them. Each completed step is an Event on the QueenBackup; the start
// and the end are Events on the QueenCluster too.
import { ApplicationFailure } from '@temporalio/common';
import { BACKUP_KIND, BACKUP_LABELS, BACKUP_PLURAL, type BackupPhase, type QueenBackup, type QueenBackupStatus } from '../crd/backup.ts';
import { withDefaults } from '../crd/defaults.ts';
import { API_VERSION, ANNOTATIONS, GROUP, PLURAL, VERSION, type QueenCluster } from '../crd/schema.ts';
import { backupSource, backupsPastKeep, type BackupSource } from '../plan/backup.ts';
import { beat, loadCluster, observeCluster, opLogger, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { looksUntil } from './waits.ts';
import { getCluster, isConflict, isNotFound, rawRequest, statusCode } from './kube.ts';
import { names } from './resources.ts';

export const SNAPSHOT_GROUP = 'snapshot.storage.k8s.io';
/** On a QueenBackup: the workflow that takes it (a retried create finds its own object by it). */
export const BACKUP_WORKFLOW_ANNOTATION = `${GROUP}/workflow-id`;

const backupsPath = (ns: string, name?: string) => `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${BACKUP_PLURAL}${name ? `/${name}` : ''}`;
export const snapshotPath = (ns: string, name?: string) => `/apis/${SNAPSHOT_GROUP}/v1/namespaces/${ns}/volumesnapshots${name ? `/${name}` : ''}`;
const MERGE = 'application/merge-patch+json';

export interface BackupRef {
  namespace: string;
  name: string;
  uid: string;
}

export interface BackupRequest {
  trigger: 'schedule' | 'request';
  /** The queenmq.com/backup value a request was made with. */
  request?: string;
  /** The name wanted (backupName: the cluster's and the workflow's start). */
  name: string;
  workflowId: string;
}

export async function getBackup(deps: ActivityDeps, ns: string, name: string): Promise<QueenBackup | null> {
  try {
    return (await rawRequest(deps.kube.kc, 'GET', backupsPath(ns, name))) as QueenBackup;
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

export async function getVolumeSnapshot(deps: ActivityDeps, ns: string, name: string): Promise<any | null> {
  try {
    return await rawRequest(deps.kube.kc, 'GET', snapshotPath(ns, name));
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

async function patchBackupStatus(deps: ActivityDeps, b: BackupRef, status: QueenBackupStatus): Promise<void> {
  await rawRequest(deps.kube.kc, 'PATCH', `${backupsPath(b.namespace, b.name)}/status`, { status }, MERGE);
}

/** The QueenBackup as an Event's involved object. */
const involved = (b: BackupRef) => ({ apiVersion: API_VERSION, kind: BACKUP_KIND, metadata: { namespace: b.namespace, name: b.name, uid: b.uid } });

/** The size of a snapshot (its restoreSize, a quantity or a number of bytes) as a person reads it. */
export function sizeText(restoreSize: unknown): string | undefined {
  if (typeof restoreSize === 'string') return restoreSize;
  if (typeof restoreSize !== 'number' || !Number.isFinite(restoreSize)) return undefined;
  for (const [unit, bytes] of [['Ti', 2 ** 40], ['Gi', 2 ** 30], ['Mi', 2 ** 20], ['Ki', 2 ** 10]] as const) {
    if (restoreSize >= bytes && restoreSize % bytes === 0) return `${restoreSize / bytes}${unit}`;
  }
  return String(restoreSize);
}

export function backupActivities(deps: ActivityDeps) {
  /** Writes the backup's phase and message while it waits (once per change) and heartbeats them. */
  const saying = (b: BackupRef) => {
    let said = '';
    return async (phase: BackupPhase, message: string, gate: string | null) => {
      beat({ gate, message });
      if (said === `${phase}|${message}`) return;
      await patchBackupStatus(deps, b, { phase, message });
      opLogger(deps, { namespace: b.namespace, name: b.name, uid: b.uid }).info({ gate }, message);
      said = `${phase}|${message}`;
    };
  };

  return {
    /**
     * The QueenBackup of this backup, made once (a retry finds the one its workflow made), Pending.
     * A request's annotation is removed once the backup exists (only if it still asks for this one).
     */
    async beginBackup(ref: ClusterRef, req: BackupRequest): Promise<BackupRef> {
      const qc = await loadCluster(deps, ref);
      const spec = withDefaults(qc.spec);
      let made: QueenBackup | null = null;
      for (let n = 1; !made; n++) {
        const name = n === 1 ? req.name : `${req.name}-${n}`;
        const existing = await getBackup(deps, ref.namespace, name);
        if (existing) {
          if (existing.metadata.annotations?.[BACKUP_WORKFLOW_ANNOTATION] === req.workflowId) made = existing;
          continue;
        }
        const body: QueenBackup = {
          apiVersion: API_VERSION,
          kind: BACKUP_KIND,
          metadata: {
            name,
            namespace: ref.namespace,
            labels: { [BACKUP_LABELS.cluster]: ref.name, [BACKUP_LABELS.trigger]: req.trigger },
            annotations: { [BACKUP_WORKFLOW_ANNOTATION]: req.workflowId },
            // Deleted with the cluster only when the spec says so; otherwise it outlives it.
            ...(spec.backup?.deleteWithCluster
              ? { ownerReferences: [{ apiVersion: API_VERSION, kind: qc.kind, name: ref.name, uid: ref.uid }] }
              : {}),
          },
          spec: { cluster: ref.name, ...(spec.backup?.volumeSnapshotClassName ? { volumeSnapshotClassName: spec.backup.volumeSnapshotClassName } : {}) },
        };
        try {
          made = (await rawRequest(deps.kube.kc, 'POST', backupsPath(ref.namespace), body)) as QueenBackup;
        } catch (err) {
          if (!isConflict(err)) throw err;
        }
      }
      const b: BackupRef = { namespace: ref.namespace, name: made.metadata.name, uid: made.metadata.uid! };
      if (!made.status?.phase) await patchBackupStatus(deps, b, { phase: 'Pending', message: 'the backup begins', workflowId: req.workflowId, startedAt: new Date().toISOString() });
      // (Once per step: an attempt after one that recorded them finds them.)
      const why = req.trigger === 'schedule' ? 'by the schedule of spec.backup' : `asked for by the ${ANNOTATIONS.backup} annotation`;
      await stepEvent(deps, qc, 'BackupStarted', `taking the backup ${b.name}, ${why}`);
      await stepEvent(deps, involved(b), 'BackupStarted', `a backup of the QueenCluster ${ref.name}, ${why}`);
      if (req.trigger === 'request' && req.request !== undefined && qc.metadata.annotations?.[ANNOTATIONS.backup] === req.request) {
        // Removed only if it still asks for this backup (a test of its value, whatever else changed).
        const key = ANNOTATIONS.backup.replaceAll('~', '~0').replaceAll('/', '~1');
        await rawRequest(
          deps.kube.kc,
          'PATCH',
          `/apis/${GROUP}/${VERSION}/namespaces/${ref.namespace}/${PLURAL}/${ref.name}`,
          [
            { op: 'test', path: `/metadata/annotations/${key}`, value: req.request },
            { op: 'remove', path: `/metadata/annotations/${key}` },
          ],
          'application/json-patch+json',
        ).catch((err) => {
          if (statusCode(err) !== 422 && !isNotFound(err)) throw err; // another value now: the watcher reads it
        });
      }
      return b;
    },

    /**
     * Waits for a moment to take the backup: no operation of the cluster moving (status.operation, but
     * one Blocked for a person),
     * a leader, and a voter caught up to take the volume of (plan/backup.ts). Returns that voter,
     * with its term and commit index read in the same look.
     */
    async awaitBackupSource(ref: ClusterRef, b: BackupRef): Promise<BackupSource> {
      const say = saying(b);
      return looksUntil<BackupSource>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        // An operation that waits for a person (parked: an approval, a pause, a held failure; or
        // Blocked) moves nothing while it waits: a backup is taken meanwhile, and does not hold a
        // worker slot for as long as the person takes.
        const op = qc.status?.operation;
        if (op && qc.status?.phase !== 'Blocked' && !op.parked) {
          await say('Pending', `waiting for ${op.type} of the cluster to end${op.step ? ` (it is ${op.step})` : ''}: a backup is not taken while an operation moves pods and members`, 'no-operation-running');
          return { againInMs: deps.settings.pollMs };
        }
        const obs = await observeCluster(deps, qc);
        // Node 1 of a cluster formed from a backup recovered with QUEEN_RAFT_FORCE_RECOVER: its volume last.
        const choice = backupSource(obs, deps.settings.caughtUpEntries, qc.status?.restore?.recoveredAt ? [1] : []);
        if ('wait' in choice) {
          await say('Pending', choice.wait, choice.gate);
          return { againInMs: deps.settings.pollMs };
        }
        return { result: choice.source };
      });
    },

    /** The VolumeSnapshot of the source's claim, owned by the QueenBackup; what it holds at least, in status. */
    async snapshotVolume(ref: ClusterRef, b: BackupRef, source: BackupSource): Promise<string> {
      await loadCluster(deps, ref);
      const backup = await getBackup(deps, b.namespace, b.name);
      if (!backup || backup.metadata.uid !== b.uid) throw ApplicationFailure.nonRetryable(`the QueenBackup ${b.name} was deleted while it was taken`, 'BackupGone');
      const claim = names.claim(ref.name, source.ordinal);
      const pod = names.pod(ref.name, source.ordinal);
      const body = {
        apiVersion: `${SNAPSHOT_GROUP}/v1`,
        kind: 'VolumeSnapshot',
        metadata: {
          name: b.name,
          namespace: b.namespace,
          labels: { [BACKUP_LABELS.cluster]: ref.name },
          ownerReferences: [{ apiVersion: API_VERSION, kind: BACKUP_KIND, name: b.name, uid: b.uid, controller: true, blockOwnerDeletion: true }],
        },
        spec: {
          ...(backup.spec.volumeSnapshotClassName ? { volumeSnapshotClassName: backup.spec.volumeSnapshotClassName } : {}),
          source: { persistentVolumeClaimName: claim },
        },
      };
      try {
        await rawRequest(deps.kube.kc, 'POST', snapshotPath(b.namespace), body);
      } catch (err) {
        if (!isConflict(err)) throw err;
        const live = await getVolumeSnapshot(deps, b.namespace, b.name);
        if (!live?.metadata?.ownerReferences?.some((o: { uid: string }) => o.uid === b.uid)) {
          throw ApplicationFailure.nonRetryable(`a VolumeSnapshot named ${b.name} already exists and is not this backup's`, 'Refused');
        }
      }
      const message = `taking a snapshot of the volume of pod ${source.ordinal} (node ${source.nodeId}, ${source.why}): it holds index ${source.commit} of term ${source.term} at least`;
      await patchBackupStatus(deps, b, {
        phase: 'Taking',
        message,
        nodeId: source.nodeId,
        pod,
        claim,
        raftIndex: source.commit,
        raftTerm: source.term,
        ...(source.voters ? { voters: source.voters } : {}),
        volumeSnapshot: b.name,
        readyToUse: false,
      });
      await stepEvent(deps, involved(b), 'SnapshotRequested', message);
      return b.name;
    },

    /**
     * Waits until the VolumeSnapshot is ready (its size and moment into status: Ready), or failed
     * (the driver's words: Failed, and the empty VolumeSnapshot deleted). Returns the backup's end.
     */
    async awaitSnapshot(ref: ClusterRef, b: BackupRef): Promise<{ ready: boolean; message: string }> {
      const say = saying(b);
      return looksUntil<{ ready: boolean; message: string }>(deps, ref, async () => {
        const vs = await getVolumeSnapshot(deps, b.namespace, b.name);
        const qc = await getCluster(deps.kube, ref.namespace, ref.name);
        if (!vs) return { result: await failBackup(deps, qc, b, `its VolumeSnapshot ${b.name} was deleted before it was ready`) };
        const st = vs.status ?? {};
        if (st.readyToUse === true) {
          const backup = await getBackup(deps, b.namespace, b.name);
          const size = sizeText(st.restoreSize);
          const message = `ready: the volume of pod ${(backup?.status?.nodeId ?? 1) - 1} (node ${backup?.status?.nodeId}) at index ${backup?.status?.raftIndex} or later${size ? `, ${size}` : ''}`;
          await patchBackupStatus(deps, b, {
            phase: 'Ready',
            message,
            readyToUse: true,
            ...(size ? { size } : {}),
            ...(st.creationTime ? { takenAt: st.creationTime } : {}),
            finishedAt: new Date().toISOString(),
          });
          await stepEvent(deps, involved(b), 'BackupReady', message);
          if (qc && qc.metadata.uid === ref.uid) await stepEvent(deps, qc, 'BackupReady', `the backup ${b.name} is ${message}`);
          return { result: { ready: true, message } };
        }
        if (st.error?.message) {
          // The driver's words, as the snapshot controller copied them; the empty snapshot goes.
          await rawRequest(deps.kube.kc, 'DELETE', snapshotPath(b.namespace, b.name)).catch((err) => {
            if (!isNotFound(err)) throw err;
          });
          return { result: await failBackup(deps, qc, b, `the snapshot failed: ${st.error.message}`) };
        }
        await say('Taking', `waiting for the VolumeSnapshot ${b.name} to be ready${st.boundVolumeSnapshotContentName ? '' : ' (the snapshot controller has not bound it to a content yet)'}`, 'snapshot-ready');
        return { againInMs: deps.settings.pollMs };
      });
    },

    /** A backup that cannot be taken: Failed with the reason (the cluster gone, the QueenBackup deleted). */
    async failBackup(ref: ClusterRef, b: BackupRef, reason: string): Promise<{ ready: boolean; message: string }> {
      return failBackup(deps, await getCluster(deps.kube, ref.namespace, ref.name), b, reason);
    },

    /** Deletes the scheduled backups of the cluster past spec.backup.keep (their VolumeSnapshots go with them). */
    async pruneBackups(ref: ClusterRef): Promise<string[]> {
      const qc = await loadCluster(deps, ref);
      const keep = withDefaults(qc.spec).backup?.keep ?? 7;
      const selector = `${BACKUP_LABELS.cluster}=${ref.name},${BACKUP_LABELS.trigger}=schedule`;
      const list = (await rawRequest(deps.kube.kc, 'GET', `${backupsPath(ref.namespace)}?labelSelector=${encodeURIComponent(selector)}`)) as { items: QueenBackup[] };
      const listing = list.items
        .filter((x) => !x.metadata.deletionTimestamp)
        .map((x) => ({ name: x.metadata.name, phase: x.status?.phase ?? null, at: Date.parse(x.status?.takenAt ?? x.metadata.creationTimestamp ?? '') || 0 }));
      const gone = backupsPastKeep(listing, keep);
      for (const name of gone) {
        await rawRequest(deps.kube.kc, 'DELETE', backupsPath(ref.namespace, name), { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Background' }).catch((err) => {
          if (!isNotFound(err)) throw err;
        });
      }
      if (gone.length) await stepEvent(deps, qc, 'BackupsDeleted', `deleted the backup${gone.length > 1 ? 's' : ''} ${gone.join(', ')}: the schedule keeps ${keep}`);
      return gone;
    },
  };
}

async function failBackup(deps: ActivityDeps, qc: QueenCluster | null, b: BackupRef, reason: string): Promise<{ ready: boolean; message: string }> {
  const live = await getBackup(deps, b.namespace, b.name);
  if (live && live.metadata.uid === b.uid && live.status?.phase !== 'Failed') {
    await patchBackupStatus(deps, b, { phase: 'Failed', message: reason, readyToUse: false, finishedAt: new Date().toISOString() });
    await stepEvent(deps, involved(b), 'BackupFailed', reason, 'Warning');
    if (qc) await stepEvent(deps, qc, 'BackupFailed', `the backup ${b.name} failed: ${reason}`, 'Warning');
  }
  return { ready: false, message: reason };
}
