// FormCluster: from a new QueenCluster (or one whose objects are gone) to a cluster that commits:
// the objects, the pods starting and electing a leader, every voter live and Ready, a write
// committing through one of them.
import { FORM_LINES } from '../plan/steps.ts';
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
      const objects = await step(FORM_LINES.objects, 'wait').applyClusterObjects(ref);
      const leader = await step(FORM_LINES.leader, 'wait').awaitLeader(ref);
      const voters = await step(FORM_LINES.voters, 'wait').awaitVoters(ref);
      const via = await step(FORM_LINES.write, 'wait').confirmWrite(ref);
      return {
        result: 'Succeeded',
        message:
          `the cluster formed: voters [${voters.join(',')}] on ${objects.pods} pods, node ${leader.leader} led at term ${leader.term}, ` +
          `a write committed through pod ${via}`,
      };
    },
  );
}
