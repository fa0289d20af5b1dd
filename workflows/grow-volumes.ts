// GrowVolumes: every claim asks for spec.storage.size; a pod whose file system waits for a restart
// is restarted (one at a time, through the stop gate); then the StatefulSet is created again
// around its running pods with the new claim template. Volumes never shrink (the API refuses it).
import { CancellationScope } from '@temporalio/workflow';
import { resumeHint, runOperation, step, type OperationInput } from './operation.ts';

export async function growVolumes(input: OperationInput): Promise<string> {
  const { ref } = input;
  const size = input.target.replace(/^volumes of /, '');
  return runOperation(
    input,
    {
      type: 'GrowVolumes',
      phase: 'Resizing',
      message: `growing the volumes: ${input.target}`,
      cancelled: async () =>
        `growing the volumes to ${input.target} was cancelled; ${resumeHint(ref)}`,
      failed: `growing the volumes to ${input.target} failed`,
    },
    async () => {
      for (;;) {
        const s = await step('wait for the next step towards the volume size wanted', 'wait').awaitVolumeStep(ref);
        switch (s.kind) {
          case 'done':
            return { result: 'Succeeded', message: `every volume is ${size}` };
          case 'expand':
            await CancellationScope.nonCancellable(() => step(s.message, 'wait').expandClaim(ref, s.ordinal, s.claimName, s.claimUid, size, s.message));
            break;
          case 'restart': {
            const pick = await step(`wait until pod ${s.ordinal} may stop`, 'wait').awaitStopGate(ref, s.ordinal, { phase: 'Resizing', next: s.next });
            if (pick) await CancellationScope.nonCancellable(() => step(s.message, 'wait').restartPod(ref, pick, { phase: 'Resizing', message: s.message }));
            break;
          }
          case 'recreate':
            // Between the delete and the create the cluster has no StatefulSet: both go together.
            await CancellationScope.nonCancellable(async () => {
              const pods = await step('delete the StatefulSet, not its pods', 'wait').deleteStatefulSetOrphan(ref, s.message);
              await step('create the StatefulSet with the new size').createStatefulSet(ref, pods);
            });
            break;
        }
      }
    },
  );
}
