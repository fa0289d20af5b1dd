// Switchover (annotation queenmq.com/switchover on a standby whose source is a QueenCluster of this
// Kubernetes cluster): a planned switch that loses nothing. The source is taken out of its clients'
// reach, the standby reads its last entry, the source stops, the standby is promoted and a write
// commits through it (the clients' write downtime ends there), and the old source becomes a
// standby of the new primary. A cancel before the source stops puts it back in its clients' reach;
// from its stop on, the switch is finished whatever happens.
import { CancellationScope } from '@temporalio/workflow';
import type { SourceRef } from '../activities/switchover.ts';
import { runOperation, step, type OperationInput } from './operation.ts';

export async function switchover(input: OperationInput): Promise<string> {
  const { ref } = input;
  let source: SourceRef | null = null;
  let fenced = false;
  return runOperation(
    input,
    {
      type: 'Switchover',
      phase: 'SwitchingOver',
      message: 'switching over to this standby',
      cancelled: async () => {
        if (source && fenced) await step("put the source back in its clients' reach").unfenceSource(ref, source);
        return 'the switchover was cancelled before the source stopped: the source takes its clients again, this cluster is still its standby';
      },
      failed: 'the switchover failed',
    },
    async () => {
      source = (await step('check that the standby follows its source', 'wait').checkSwitchover(ref)).source;
      const src = source;
      fenced = true;
      const fencedAt = await step("take the source out of its clients' reach", 'wait').fenceSource(ref, src);
      const read = await step("wait for the standby to read the source's last entry", 'wait').awaitCaughtUp(ref, src);
      return CancellationScope.nonCancellable(async () => {
        await step('stop the source', 'wait').stopSource(ref, src);
        const where = await step('read where the standby stands in its source', 'wait').standbyPosition(ref);
        await step('promote the standby', 'wait').promoteStandbyNodes(ref, where);
        const via = await step('wait for a write to commit', 'wait').confirmWrite(ref);
        await step('record the promotion').finishPromotion(ref, where, true);
        const downtime = await step('make this cluster the source').finishSwitchover(ref, fencedAt);
        await step('make the old source a standby of the new primary', 'wait').demoteSource(ref, src);
        return {
          result: 'Succeeded' as const,
          message:
            `switched over from ${src.namespace}/${src.name}: it had read the source's last entry (${read}), a write committed through pod ${via}, ` +
            `the source took no write for ${downtime}; ${src.namespace}/${src.name} starts again as a standby of this cluster`,
        };
      });
    },
  );
}
