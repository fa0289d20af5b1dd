// RollingUpgrade: a new version (or any change that reaches the pods) through the cluster, one pod
// at a time, the leader last, never a second voter down. The StatefulSet is OnDelete: applying the
// template restarts nothing, the workflow deletes the pods. Each step re-reads the spec, so a
// second version change retargets the running upgrade; a yield stops it at its next safe point;
// a cancel stops it between pods, never in the middle of one.
import { CancellationScope } from '@temporalio/workflow';
import { podsText } from './plan/format.ts';
import { resumeHint, runOperation, step, yieldable, YIELDED, type OperationInput } from './operation.ts';

export async function rollingUpgrade(input: OperationInput): Promise<string> {
  const { ref } = input;
  const yielding = yieldable();
  let version = input.target;
  let applied: { specHash: string; templateHash: string; version: string } | null = null;
  const restarted: number[] = [];
  const describe = () => step('which pods run which version').describeVersions(ref);
  const sofar = () => (restarted.length === 0 ? 'no restart' : `restarting ${podsText(restarted)}`);
  /** A cancel ends the operation once the pod restarted last is back: the cluster is left whole. */
  const whole = async () => {
    if (restarted.length > 0 && applied) {
      await step('wait for the cluster to be whole', 'wait').awaitSettled(ref, { specHash: applied.specHash, stopping: true });
    }
  };
  return runOperation(
    input,
    {
      type: 'RollingUpgrade',
      phase: 'Upgrading',
      message: `applying the new pod template (${version})`,
      cancelled: async () => {
        await whole();
        return (
          `the upgrade to ${version} was cancelled after ${sofar()}: ` +
          `${await describe()}; ${resumeHint(ref)}`
        );
      },
      failed: `the upgrade to ${version} failed`,
    },
    async () => {
      applied = await step(`apply ${version} to the pod template`).applyPodTemplate(ref);
      version = applied.version;
      for (;;) {
        const target = applied;
        const next = await yielding.run(() => step('wait until the next pod may stop', 'wait').awaitNextRestart(ref, target));
        if (next === YIELDED) {
          return {
            result: 'Yielded',
            message: `the upgrade to ${version} yielded to ${yielding.requested} after ${sofar()}: ${await describe()}`,
          };
        }
        if (next.kind === 'retarget') {
          applied = await step('apply the new spec to the pod template').applyPodTemplate(ref);
          version = applied.version;
          continue;
        }
        if (next.kind === 'restart') {
          // A pod being stopped is finished before a cancel or a yield is honoured.
          const pick = next.pick;
          const r = await CancellationScope.nonCancellable(() => step(`restarting pod ${pick.ordinal}`, 'wait').restartPod(ref, pick));
          if (r.restarted) restarted.push(pick.ordinal);
          continue;
        }
        // No pod runs an old template: the last restarted pod has to come back and the cluster commit.
        const settled = await yielding.run(() => step('wait for the cluster to settle', 'wait').awaitSettled(ref, target));
        if (settled === YIELDED) {
          return { result: 'Yielded', message: `the upgrade to ${version} yielded to ${yielding.requested} after ${sofar()}` };
        }
        if (settled.again) continue;
        const done = restarted.length === 0 ? 'no pod needed a restart' : `restarted ${podsText(restarted)}, the leader last`;
        if (!settled.settled) {
          return { result: 'Failed', message: `the upgrade to ${version} ${done}, but the cluster did not settle: ${settled.reason ?? 'unknown'}` };
        }
        return { result: 'Succeeded', message: `every pod runs ${version}: ${done}` };
      }
    },
  );
}
