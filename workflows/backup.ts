// TakeBackup: one backup of a QueenCluster, a QueenBackup holding a VolumeSnapshot of one voter's
// volume. Started by the cluster's Temporal Schedule (spec.backup.schedule; it then deletes the
// scheduled backups past spec.backup.keep) or by the queenmq.com/backup annotation.
//
// It does not share the cluster's operation workflow id (queencluster/<ns>/<name>): a backup
// changes nothing in the cluster, and under that id a Schedule's start would be refused, or would
// refuse the upgrade, whenever the two met. It waits instead, as its first step, until no
// operation of the cluster runs (status.operation): a snapshot is taken of a voter that is caught
// up while pods and members stand still. Meanwhile the Schedule's overlap policy (Skip) skips the
// times that fall while it waits, so backups never pile up behind a long upgrade.
import { CancellationScope, isCancellation, workflowInfo } from '@temporalio/workflow';
import type { ClusterRef } from '../activities/index.ts';
import { backupName } from '../plan/backup.ts';
import { failureMessage, failureType, step } from './operation.ts';

export interface BackupInput {
  ref: ClusterRef;
  trigger: 'schedule' | 'request';
  /** The queenmq.com/backup value a request was made with. */
  request?: string;
}

export async function takeBackup(input: BackupInput): Promise<string> {
  const { ref } = input;
  const info = workflowInfo();
  const begin = step('create the QueenBackup');
  let b;
  try {
    b = await begin.beginBackup(ref, { trigger: input.trigger, request: input.request, name: backupName(ref.name, info.startTime), workflowId: info.workflowId });
  } catch (err) {
    if (failureType(err) === 'ClusterGone') return `the QueenCluster ${ref.namespace}/${ref.name} is gone: no backup`;
    throw err;
  }
  let end: { ready: boolean; message: string };
  try {
    const source = await step('wait for a moment to take the backup: no operation running, a caught-up voter', 'wait').awaitBackupSource(ref, b);
    await step(`take a snapshot of the volume of pod ${source.ordinal}`).snapshotVolume(ref, b, source);
    end = await step('wait for the snapshot to be ready', 'wait').awaitSnapshot(ref, b);
  } catch (err) {
    const why = isCancellation(err) ? 'the backup was cancelled' : failureType(err) === 'ClusterGone' ? 'the QueenCluster was deleted before the backup was taken' : failureMessage(err);
    await CancellationScope.nonCancellable(() => step('record that the backup failed').failBackup(ref, b, why));
    if (isCancellation(err) || failureType(err) === 'ClusterGone' || failureType(err) === 'BackupGone') return `backup ${b.name}: ${why}`;
    throw err;
  }
  if (input.trigger === 'schedule') {
    const gone = await step('delete the backups past spec.backup.keep')
      .pruneBackups(ref)
      .catch((err: unknown) => {
        if (failureType(err) === 'ClusterGone') return [] as string[];
        throw err;
      });
    if (gone.length) return `backup ${b.name}: ${end.message}; deleted ${gone.join(', ')}`;
  }
  return `backup ${b.name}: ${end.message}`;
}
