// PromoteStandby (annotation queenmq.com/promote): a standby becomes an ordinary cluster after the
// loss of its source. Where it stands first (the Event says what the promotion loses, as the
// broker reports it), then the promotion (asked again after a crash it is a no-op), then a write
// that commits through it, then the record in status and the annotation gone. Once the promotion
// is asked of the brokers nothing cancels it: a promotion cannot be taken back.
import { CancellationScope } from '@temporalio/workflow';
import { runOperation, step, type OperationInput } from './operation.ts';

export async function promoteStandby(input: OperationInput): Promise<string> {
  const { ref } = input;
  return runOperation(
    input,
    {
      type: 'PromoteStandby',
      phase: 'Promoting',
      message: 'promoting the standby',
      cancelled: async () => 'the promotion was cancelled before it was asked of the brokers: the cluster is still a standby',
      failed: 'promoting the standby failed',
    },
    async () => {
      const where = await step('read where the standby stands in its source', 'wait').standbyPosition(ref);
      return CancellationScope.nonCancellable(async () => {
        const done = await step('promote the standby', 'wait').promoteStandbyNodes(ref, where);
        const via = await step('wait for a write to commit', 'wait').confirmWrite(ref);
        await step('record the promotion').finishPromotion(ref, where, false);
        return {
          result: 'Succeeded' as const,
          message: where.already
            ? `the standby was promoted already (at entry ${where.position} of its source); a write committed through pod ${via}`
            : `the standby is an ordinary cluster: promoted at entry ${done.position} of its source, a write committed through pod ${via}`,
        };
      });
    },
  );
}
