// RestoreCluster: FormCluster for a new QueenCluster with spec.bootstrap.fromBackup. Pod 0 starts
// alone on a claim made from the backup's snapshot, with QUEEN_RAFT_FORCE_RECOVER=1: node 1 makes
// itself the only voter of a new cluster in a new term, at its own addresses, holding everything
// the backup's volume held (the broker's repair.rs; its rehearsal test/recovery/k8s-K4-restore.sh
// does these steps by hand). The variable is then removed and pod 0 restarted without it, before any
// member joins: the broker refuses to boot with it once the membership grew. The operation ends with
// a cluster of one voter, and the watcher then runs ScaleVoters to spec.replicas as for any
// scale-up: the other nodes join as learners, catch up from node 1 and are promoted together.
// The backup and the cluster it was taken of are only read.
import { FORM_LINES, restoreLines } from '../plan/steps.ts';
import { runOperation, step, type OperationInput } from './operation.ts';

export async function restoreCluster(input: OperationInput): Promise<string> {
  const { ref } = input;
  return runOperation(
    input,
    {
      type: 'FormCluster',
      phase: 'Forming',
      message: 'forming the cluster from a backup',
      cancelled: async () => 'forming the cluster from a backup was cancelled; to resume, annotate queenmq.com/retry with a new value',
      failed: 'forming the cluster from a backup failed',
    },
    async () => {
      const source = await step(restoreLines('').source, 'wait').resolveRestoreSource(ref);
      const line = restoreLines(`the VolumeSnapshot ${source.volumeSnapshot}`);
      await step(line.claim).createRestoreClaim(ref, source);
      await step(line.objects, 'wait').applyClusterObjects(ref, { forceRecover: 1 });
      const leader = await step(line.leader, 'wait').awaitLeader(ref);
      const recovered = await step(line.recovered, 'wait').finishForceRecovery(ref);
      await step(FORM_LINES.voters, 'wait').awaitVoters(ref);
      const via = await step(FORM_LINES.write, 'wait').confirmWrite(ref);
      const from = source.backup ? `the backup ${source.backup}${source.sourceCluster ? ` of ${source.sourceCluster}` : ''}` : `the VolumeSnapshot ${source.volumeSnapshot}`;
      const held = source.raftIndex !== null ? `, which holds index ${source.raftIndex} at least` : '';
      return {
        result: 'Succeeded',
        message:
          `the cluster formed from ${from}${held}: node 1 recovered alone (term ${leader.term}, commit ${recovered.commit}) and a write committed ` +
          `through pod ${via}; the other voters join it next, as learners`,
      };
    },
  );
}
