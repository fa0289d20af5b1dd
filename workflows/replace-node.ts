// ReplaceNode: a pod whose volume is lost, damaged or stale gets an empty one and its node copies
// everything from the leader again. Out of the membership first (a leader hands leadership away
// before, through the stop gate), then the volume, then back in as a learner, promoted once it
// caught up; the annotation goes at the end. Removing the annotation before the node left the
// membership calls the replacement off; after that the node is always re-added, cancel or not,
// because only then is the cluster whole again. The node leaves through the stop gate (the voters
// that stay must carry the cluster). Only forming the cluster again is more urgent: the waits
// yield to it (a cluster without its StatefulSet cannot start the pod anyway), and with the
// annotation still there the replacement starts again afterwards and goes on from where it is.
import { CancellationScope, patched } from '@temporalio/workflow';
import { nodeIdOf, parseOrdinal } from '../crd/ordinals.ts';
import { replaceLines } from '../plan/steps.ts';
import { runOperation, step, yieldable, YIELD_AT_WAITS, YIELDED, type OperationInput } from './operation.ts';

/** An activity's outcome: runs recorded before it answered an object said it alone. */
export const outcomeOf = <T extends string>(answer: T | { outcome: T }): T => (typeof answer === 'string' ? answer : answer.outcome);

export async function replaceNode(input: OperationInput): Promise<string> {
  const { ref } = input;
  const pod = input.target;
  const yielding = yieldable(patched(YIELD_AT_WAITS), input.ref);
  const yieldedBefore = () => ({
    result: 'Yielded' as const,
    message: `the replacement of ${pod} yielded to ${yielding.requested} before its node left the membership: the membership and the volume are as they were`,
  });
  return runOperation(
    input,
    {
      type: 'ReplaceNode',
      phase: 'Replacing',
      message: `replacing ${pod}`,
      cancelled: async () => `the replacement of ${pod} was cancelled before its node left the membership: the membership and the volume are as they were`,
      failed: `the replacement of ${pod} failed`,
    },
    async () => {
      // The step's line once the pod names a voter's (the check refuses any other): its Event's words.
      const ordinal = parseOrdinal(ref.name, pod);
      const begin = ordinal >= 0 ? replaceLines(ordinal, nodeIdOf(ordinal)).begin : `replacing ${pod}`;
      const checked = await yielding.run(() => step(begin, 'wait').checkReplacement(ref, pod));
      if (checked === YIELDED) return yieldedBefore();
      if ('abandoned' in checked) return { result: 'Succeeded', message: `the replacement of ${pod} was called off: ${checked.abandoned}` };
      const r = checked.replacement;
      const line = replaceLines(r.ordinal, r.nodeId);
      for (;;) {
        const answer = await yielding.run(() => step(line.leave, 'wait').leaveMembership(ref, r));
        if (answer === YIELDED) return yieldedBefore();
        const left = outcomeOf(answer);
        if (left === 'left') break;
        if (left === 'abandoned') {
          return {
            result: 'Succeeded',
            message: `the replacement of pod ${r.ordinal} was called off before node ${r.nodeId} left the membership: the membership and the volume are as they were`,
          };
        }
        // It leads: stopped once, through the stop gate, it hands leadership away.
        const pick = await yielding.run(() =>
          step(`wait until pod ${r.ordinal} may stop`, 'wait').awaitStopGate(ref, r.ordinal, { phase: 'Replacing', next: `pod ${r.ordinal} leads` }, r.pod),
        );
        if (pick === YIELDED) return yieldedBefore();
        if (pick) {
          // Its node leaves next: the restart ends once another node leads.
          await CancellationScope.nonCancellable(() => step(line.handOff, 'wait').restartPod(ref, pick, { phase: 'Replacing', message: line.handOff, leaving: true }));
        }
      }
      // Out of the membership: from here on the node is re-added whatever happens (a cancel waits
      // for the end; a yield to forming the cluster again leaves the annotation, which starts the
      // replacement again afterwards).
      const rest = await CancellationScope.nonCancellable(async () => {
        await step(line.wipe, 'wait').wipeVolume(ref, r);
        if ((await yielding.run(() => step(`wait for pod ${r.ordinal} to start empty`, 'wait').awaitEmptyNode(ref, r))) === YIELDED) return YIELDED;
        if ((await yielding.run(() => step(line.learner, 'wait').addLearnerNode(ref, r.nodeId, 'Replacing'))) === YIELDED) return YIELDED;
        if ((await yielding.run(() => step(line.promote, 'wait').promoteNodes(ref, [r.nodeId], 'Replacing'))) === YIELDED) return YIELDED;
        if ((await yielding.run(() => step(line.done, 'wait').finishReplacement(ref, r))) === YIELDED) return YIELDED;
        return 'done';
      });
      if (rest === YIELDED) {
        return {
          result: 'Yielded',
          message: `the replacement of pod ${r.ordinal} yielded to ${yielding.requested} after node ${r.nodeId} left the membership: it goes on afterwards, the annotation stays`,
        };
      }
      return { result: 'Succeeded', message: `pod ${r.ordinal} is a voter again: node ${r.nodeId} left the membership, got an empty volume and caught up from the leader` };
    },
  );
}
