// FormCluster: from a new QueenCluster (or one whose objects are gone) to a cluster that commits:
// the objects, the pods starting and electing a leader, every voter live and Ready, a write
// committing through one of them.
import { runOperation, step, type OperationInput } from './operation.ts';

export async function formCluster(input: OperationInput): Promise<string> {
  const { ref } = input;
  return runOperation(
    input,
    {
      type: 'FormCluster',
      phase: 'Forming',
      message: 'applying the Services, the disruption budget and the StatefulSet',
      cancelled: async () => 'forming the cluster was cancelled; to resume, annotate queenmq.com/retry with a new value',
      failed: 'forming the cluster failed',
    },
    async () => {
      const objects = await step('apply the Services, the disruption budget and the StatefulSet', 'wait').applyClusterObjects(ref);
      const leader = await step('wait for the pods to start and elect a leader', 'wait').awaitLeader(ref);
      const voters = await step('wait for every voter to be live and Ready', 'wait').awaitVoters(ref);
      const via = await step('wait for a write to commit', 'wait').confirmWrite(ref);
      return {
        result: 'Succeeded',
        message:
          `the cluster formed: voters [${voters.join(',')}] on ${objects.pods} pods, node ${leader.leader} led at term ${leader.term}, ` +
          `a write committed through pod ${via}`,
      };
    },
  );
}
