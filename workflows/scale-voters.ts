// ScaleVoters: to spec.replicas voters through the broker's membership API. Up: pods first, each
// new node as a learner, all promoted in one change once caught up. Down: each node leaves the
// membership while its pod runs (a leader is stopped once first, through the stop gate, so it
// hands leadership away), then the pods above it go, then their claims. The target is read again
// at every step, so a second change of replicas retargets it. A node leaves through the stop gate,
// waited for where a cancel or a yield may stop the operation; a pod that holds the data of a node
// that left gets an empty volume before the node is added again. A removal and the claims' deletion
// answer the step after them when their last look found nothing holding it: it is taken without a
// wait in between (one look, not two, between two steps).
import { CancellationScope, patched } from '@temporalio/workflow';
import type { ActionableVoterStep } from '../activities/scale.ts';
import { outcomeOf } from './replace-node.ts';
import { resumeHint, runOperation, step, yieldable, YIELD_AT_WAITS, YIELDED, type OperationInput } from './operation.ts';

export async function scaleVoters(input: OperationInput): Promise<string> {
  const { ref } = input;
  const yielding = yieldable(patched(YIELD_AT_WAITS), input.ref);
  const done: string[] = [];
  const sofar = () => (done.length === 0 ? 'no step' : done.join(', '));
  return runOperation(
    input,
    {
      type: 'ScaleVoters',
      phase: 'Scaling',
      message: `changing the voters: ${input.target}`,
      cancelled: async () =>
        `changing the voters to ${input.target} was cancelled after ${sofar()}; ` +
        resumeHint(ref),
      failed: `changing the voters to ${input.target} failed`,
    },
    async () => {
      // The step after a removal or the claims' deletion, when the step's own look found it with
      // nothing holding it (runs recorded before answered without one: they wait as recorded).
      let next: ActionableVoterStep | null = null;
      for (;;) {
        // A yield or a cancel asked for meanwhile is honoured at the wait, as before.
        const chained = yielding.requested === null && !CancellationScope.current().consideredCancelled ? next : null;
        next = null;
        const s = chained ?? (await yielding.run(() => step('wait for the next step towards the voters wanted', 'wait').awaitVoterStep(ref)));
        if (s === YIELDED) {
          return { result: 'Yielded', message: `changing the voters to ${input.target} yielded to ${yielding.requested} after ${sofar()}` };
        }
        if (s.kind === 'done') {
          return { result: 'Succeeded', message: `the cluster has ${input.target}${done.length ? `: ${done.join(', ')}` : ''}` };
        }
        // A step once begun is finished before a cancel is honoured.
        let took = true;
        await CancellationScope.nonCancellable(async () => {
          switch (s.kind) {
            case 'scale-pods':
              await step(s.message).scalePods(ref, s.pods, s.message);
              break;
            case 'add-learner':
              await step(s.message, 'wait').addLearnerNode(ref, s.nodeId, 'Scaling');
              break;
            case 'promote':
              await step(s.message, 'wait').promoteNodes(ref, s.nodeIds, 'Scaling');
              break;
            case 'remove-member': {
              // `held`: the gate closed again since the wait for it; the next wait says why.
              const answer = await step(s.message, 'wait').removeNode(ref, s.nodeId, 'Scaling');
              took = outcomeOf(answer) === 'removed';
              next = (typeof answer === 'object' && answer.next) || null;
              break;
            }
            case 'wipe-claims':
              // A wait: the pods are drained before they go (`--drain-wait`, up to 10 minutes), longer
              // than a quick step's timeout, whose attempts would then overlap.
              await step(s.message, 'wait').wipeClaims(ref, s.volumes);
              break;
            case 'wipe-claim':
              // One volume a step (a history recorded before the volumes went together).
              await step(s.message, 'wait').wipeClaim(ref, s);
              break;
            case 'delete-claim':
              // One claim a step (a history recorded before the claims went together).
              await step(s.message).deleteClaim(ref, s.claimName, s.claimUid, s.message);
              break;
            case 'delete-claims':
              next = (await step(s.message).deleteClaims(ref, s.claims))?.next ?? null;
              break;
            case 'hand-off':
              break;
          }
        });
        if (s.kind === 'hand-off') {
          const ordinal = s.nodeId - 1;
          const pick = await yielding.run(() => step(`wait until pod ${ordinal} may stop`, 'wait').awaitStopGate(ref, ordinal, { phase: 'Scaling', next: `node ${s.nodeId} leads` }));
          if (pick === YIELDED) {
            return { result: 'Yielded', message: `changing the voters to ${input.target} yielded to ${yielding.requested} after ${sofar()}` };
          }
          if (pick) {
            await CancellationScope.nonCancellable(() => step(s.message, 'wait').restartPod(ref, pick, { phase: 'Scaling', message: s.message, leaving: true }));
          }
        }
        if (took) done.push(s.message);
      }
    },
  );
}
