// GrowVolumes: every claim asks for spec.storage.size (all in one step); a pod whose file system
// waits for a restart is restarted (one at a time, through the stop gate); then the StatefulSet is
// created again around its running pods with the new claim template. Volumes never shrink (the API
// refuses it).
// Each step carries the size read from the spec at that step, so a second raise retargets the
// running grow; the StatefulSet made again keeps the pod count of the one it replaces.
import { CancellationScope, patched } from '@temporalio/workflow';
import { resumeHint, runOperation, step, yieldable, YIELD_AT_WAITS, YIELDED, type OperationInput } from './operation.ts';

/** The patch behind which the StatefulSet's re-creation is one step, not a deletion and a creation. */
export const RECREATE_IN_ONE_STEP = 'recreate-in-one-step';

export async function growVolumes(input: OperationInput): Promise<string> {
  const { ref } = input;
  const yielding = yieldable(patched(YIELD_AT_WAITS), input.ref);
  // The size worked towards: the one the operation started for, then whatever the latest step read.
  let size = input.target.replace(/^volumes of /, '');
  const yielded = () => ({ result: 'Yielded' as const, message: `growing the volumes to ${size} yielded to ${yielding.requested}` });
  return runOperation(
    input,
    {
      type: 'GrowVolumes',
      phase: 'Resizing',
      message: `growing the volumes: ${input.target}`,
      cancelled: async () => `growing the volumes to ${size} was cancelled; ${resumeHint(ref)}`,
      failed: `growing the volumes to ${size} failed`,
    },
    async () => {
      // The pods this run restarted: it ends once they are Ready again.
      const restarted: number[] = [];
      for (;;) {
        const s = await yielding.run(() => step('wait for the next step towards the volume size wanted', 'wait').awaitVolumeStep(ref, restarted));
        if (s === YIELDED) return yielded();
        // Steps recorded before they carried a size (older runs) work towards the first size.
        if ('size' in s && s.size) size = s.size;
        switch (s.kind) {
          case 'done':
            return { result: 'Succeeded', message: `every volume is ${size}` };
          case 'expand-claims': {
            const to = size;
            await CancellationScope.nonCancellable(() => step(s.message, 'wait').expandClaims(ref, s.claims, to, s.message));
            break;
          }
          case 'expand': {
            // A step recorded before the claims grew together (a history replayed).
            const to = size;
            await CancellationScope.nonCancellable(() => step(s.message, 'wait').expandClaim(ref, s.ordinal, s.claimName, s.claimUid, to, s.message));
            break;
          }
          case 'restart': {
            const pick = await yielding.run(() =>
              step(`wait until pod ${s.ordinal} may stop`, 'wait').awaitStopGate(ref, s.ordinal, { phase: 'Resizing', next: s.next, growing: true, drainAhead: true }),
            );
            if (pick === YIELDED) return yielded();
            if (pick) {
              const r = await CancellationScope.nonCancellable(() => step(s.message, 'wait').restartPod(ref, pick, { phase: 'Resizing', message: s.message }));
              if (r.restarted && !restarted.includes(s.ordinal)) restarted.push(s.ordinal);
            }
            break;
          }
          case 'recreate':
            // Between the delete and the create the cluster has no StatefulSet: both go together,
            // in one step (runs recorded before took two).
            await CancellationScope.nonCancellable(async () => {
              if (patched(RECREATE_IN_ONE_STEP)) {
                await step(s.message, 'wait').recreateStatefulSet(ref, s.message, s.pods);
                return;
              }
              const pods = await step(s.message, 'wait').deleteStatefulSetOrphan(ref, s.message);
              await step('create the StatefulSet with the new size').createStatefulSet(ref, s.pods ?? pods);
            });
            break;
        }
      }
    },
  );
}
