// RollingUpgrade: a new version (or any change that reaches the pods) through the cluster, one pod
// at a time, the leader last, never a second voter down. The StatefulSet is OnDelete: applying the
// template restarts nothing, the workflow deletes the pods. Each step re-reads the spec, so a
// second version change retargets the running upgrade; a yield stops it at its next safe point;
// a cancel stops it between pods, never in the middle of one.
//
// The new version is watched as it goes: a pod on it that crash-loops, or a restarted pod that is
// not Ready and live within spec.upgrade.progressDeadlineSeconds, fails the upgrade; with
// spec.upgrade.canarySeconds the first pod on it soaks that long, watched, before the next moves.
// A failure holds the upgrade (onFailure Hold) or rolls it back (Rollback): the pods it moved go
// back to the template recorded before the first one moved, through the same stop gate, the leader
// last, and it ends RolledBack. The rollback is recorded in status, so a later run finishes it.
import { CancellationScope, patched, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { SEARCH_ATTRIBUTES } from './search-attributes.ts';
import type { FailureDecision, RollbackTarget, UpgradeFailure } from '../activities/upgrade.ts';
import { podsText } from '../plan/format.ts';
import type { ProgressWatch } from '../plan/progress.ts';
import { canaryLine, restartLine } from '../plan/steps.ts';
import { resumeHint, runOperation, step, waitsPark, yieldable, YIELDED, type OperationInput, type Outcome } from './operation.ts';

/** Patches: the steps added to the sequence of a recorded upgrade (see test/workflows/replay.test.ts). */
export const PATCHES = {
  /** A failed new version rolls back (onFailure Rollback). */
  rollback: 'upgrade-rollback',
  /** The first pod on the new version soaks (canarySeconds). */
  canary: 'upgrade-canary',
  /** A retargeted upgrade is found in the Web UI by its new version (QueenTarget). */
  retargetSearch: 'upgrade-retarget-search',
} as const;

/**
 * A retargeted upgrade (a second version change) is found by the version it goes to now. Only
 * where the run carries the attributes (they may not be registered in the namespace).
 */
function retargetSearch(target: string): void {
  if (workflowInfo().typedSearchAttributes.get(SEARCH_ATTRIBUTES.target) === undefined) return;
  upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.target, value: target }]);
}

export async function rollingUpgrade(input: OperationInput): Promise<string> {
  const { ref } = input;
  const yielding = yieldable(true, ref);
  let version = input.target;
  let applied: { specHash: string; templateHash: string; version: string; rollingBack?: RollbackTarget; held?: UpgradeFailure } | null = null;
  const restarted: number[] = [];
  /** Set once a rollback began: where it goes, and the pods it moved back. */
  let back: RollbackTarget | null = null;
  const wentBack: number[] = [];
  const describe = () => step('which pods run which version').describeVersions(ref);
  const sofar = () => (restarted.length === 0 ? 'no restart' : `restarting ${podsText(restarted)}`);
  /**
   * A cancel ends the operation once the pod restarted last is back: the cluster is left whole. Not
   * in a rollback: the pods still on the failed version would not come back (a retry finishes it).
   */
  const whole = async () => {
    if (restarted.length > 0 && !back && applied) {
      await step('wait for the cluster to be whole', 'wait').awaitSettled(ref, { specHash: applied.specHash, stopping: true });
    }
  };

  /** Takes the pods the upgrade moved back to the template recorded before the first one moved. */
  const rollBack = async (failure: UpgradeFailure): Promise<Outcome> => {
    const target = await step(`rolling back from ${failure.failedVersion}`).applyPreviousTemplate(ref, { ...failure, fingerprint: input.fingerprint });
    if ('impossible' in target) {
      return { result: 'Failed', message: `the upgrade to ${failure.failedVersion} failed: ${failure.reason}; it cannot roll back: ${target.impossible}` };
    }
    back = target;
    const to = target;
    const yielded = () => ({
      result: 'Yielded' as const,
      message: `the rollback from ${to.failedVersion} to ${to.version} yielded to ${yielding.requested} after ${wentBack.length === 0 ? 'no restart' : `restarting ${podsText(wentBack)}`}; it goes on after`,
    });
    for (;;) {
      const next = await yielding.run(() => step('wait until the next pod may go back', 'wait').awaitRollbackRestart(ref, to));
      if (next === YIELDED) return yielded();
      // It cannot be made (the cluster's catalogue version was raised past the previous version's
      // build) and the spec changed since: the rollback ends, and the new spec goes on.
      if (next.kind === 'superseded') {
        await step('the rollback is over').endRollback(ref);
        return { result: 'Failed', message: next.message };
      }
      if (next.kind === 'restart') {
        const pick = next.pick;
        const r = await CancellationScope.nonCancellable(() =>
          step(`rolling back pod ${pick.ordinal} to ${to.version}`, 'wait').restartPod(ref, pick, { phase: 'Upgrading', message: `rolling back pod ${pick.ordinal} to ${to.version}` }),
        );
        if (r.restarted) wentBack.push(pick.ordinal);
        continue;
      }
      const settled = await yielding.run(() =>
        step('wait for the cluster to settle', 'wait').awaitSettled(ref, { specHash: applied?.specHash ?? '', wantedHash: to.templateHash }),
      );
      if (settled === YIELDED) return yielded();
      if (settled.again) continue;
      await step('the rollback is over').endRollback(ref);
      const moved = wentBack.length === 0 ? 'no pod had to go back' : `${podsText(wentBack)} went back to ${to.version}`;
      const unsettled = settled.settled ? '' : ` (the cluster did not settle: ${settled.reason ?? 'unknown'})`;
      return {
        result: 'RolledBack',
        message:
          `rolled back to ${to.version}: the upgrade to ${to.failedVersion} failed: ${to.reason}; ${moved}${unsettled}; ` +
          `${to.failedVersion} is not tried again until the spec changes, or: ${resumeHint(ref).replace(/^to resume: /, '')}`,
      };
    }
  };

  /**
   * A failure under onFailure Hold waits for a person's decision, here in the workflow: the verdict
   * is this workflow's, whatever the pods do meanwhile and whatever happens to the operator.
   */
  const decide = (failure: UpgradeFailure) =>
    yielding.run(() => step(`the upgrade to ${failure.failedVersion} holds for a person: ${failure.reason}`, 'wait').awaitFailureDecision(ref, failure));
  const heldYielded = (failure: UpgradeFailure): Outcome => ({
    result: 'Yielded',
    message: `the upgrade to ${failure.failedVersion}, held for a person (${failure.reason}), yielded to ${yielding.requested} after ${sofar()}; it holds again after`,
  });
  /** A new spec (another version) is applied: the upgrade goes on towards it. */
  const retarget = async () => {
    applied = await step('apply the new spec to the pod template').applyPodTemplate(ref);
    if (applied.version !== version && patched(PATCHES.retargetSearch)) retargetSearch(applied.version);
    version = applied.version;
  };

  return runOperation(
    input,
    {
      type: 'RollingUpgrade',
      phase: 'Upgrading',
      message: `applying the new pod template (${version})`,
      cancelled: async () => {
        await whole();
        const what = back ? `the rollback from ${back.failedVersion} to ${back.version}` : `the upgrade to ${version}`;
        const done = back ? (wentBack.length === 0 ? 'no restart' : `restarting ${podsText(wentBack)}`) : sofar();
        return `${what} was cancelled after ${done}: ${await describe()}; ${resumeHint(ref)}`;
      },
      failed: `the upgrade to ${version} failed`,
    },
    async () => {
      applied = await step(`apply ${version} to the pod template`).applyPodTemplate(ref);
      version = applied.version;
      const resumed = applied.rollingBack;
      if (resumed && patched(PATCHES.rollback)) return rollBack({ reason: resumed.reason, failedVersion: resumed.failedVersion });
      // A failure an earlier run of this upgrade held for a person still holds.
      let held: UpgradeFailure | null = applied.held && waitsPark() ? applied.held : null;
      /** The pod restarted last, until it has come up on the new version (the progress deadline runs from its restart). */
      let watch: ProgressWatch | null = null;
      for (;;) {
        if (held) {
          const failure = held;
          const decided: FailureDecision | typeof YIELDED = await decide(failure);
          if (decided === YIELDED) return heldYielded(failure);
          held = null;
          if (decided === 'rollback') return rollBack(failure);
          if (decided === 'retarget') await retarget();
          // `again`: the version is tried again from where the pods are; the pod restarted last gets its deadline anew.
          const last = watch as ProgressWatch | null;
          if (decided === 'again' && last) watch = { ordinal: last.ordinal, since: Date.now() };
          continue;
        }
        const target = applied;
        const next = await yielding.run(() => step('wait until the next pod may stop', 'wait').awaitNextRestart(ref, { specHash: target.specHash, watch }));
        if (next === YIELDED) {
          return {
            result: 'Yielded',
            message: `the upgrade to ${version} yielded to ${yielding.requested} after ${sofar()}: ${await describe()}`,
          };
        }
        if (next.kind === 'retarget') {
          await retarget();
          continue;
        }
        if (next.kind === 'failed') {
          if (next.hold) held = next.failure;
          else if (patched(PATCHES.rollback)) return rollBack(next.failure);
          continue;
        }
        if (next.kind === 'restart') {
          // A pod being stopped is finished before a cancel or a yield is honoured.
          const pick = next.pick;
          const r = await CancellationScope.nonCancellable(() => step(restartLine(pick.ordinal), 'wait').restartPod(ref, pick));
          if (r.restarted) restarted.push(pick.ordinal);
          watch = r.restarted ? { ordinal: pick.ordinal, since: Date.now() } : watch;
          const seconds = next.canarySeconds ?? 0;
          // The canary soaks; a failure held for a person and then let go (`again`) soaks it once more.
          for (let soak = r.restarted && seconds > 0 && patched(PATCHES.canary); soak; ) {
            soak = false;
            const since = Date.now();
            const canary = await yielding.run(() =>
              step(canaryLine(pick.ordinal, version, seconds), 'wait').awaitCanary(ref, {
                ordinal: pick.ordinal,
                oldUid: pick.podUid,
                since,
                specHash: target.specHash,
                version,
                seconds,
              }),
            );
            if (canary === YIELDED) {
              return { result: 'Yielded', message: `the upgrade to ${version} yielded to ${yielding.requested} during the canary of pod ${pick.ordinal}: ${await describe()}` };
            }
            if (canary.kind !== 'failed') break;
            if (!canary.hold) return rollBack(canary.failure);
            const decided = await decide(canary.failure);
            if (decided === YIELDED) return heldYielded(canary.failure);
            if (decided === 'rollback') return rollBack(canary.failure);
            if (decided === 'retarget') await retarget();
            soak = decided === 'again';
          }
          continue;
        }
        // No pod runs an old template: the last restarted pod has to come back and the cluster commit.
        const settled = await yielding.run(() => step('wait for the cluster to settle', 'wait').awaitSettled(ref, { ...target, watch }));
        if (settled === YIELDED) {
          return { result: 'Yielded', message: `the upgrade to ${version} yielded to ${yielding.requested} after ${sofar()}` };
        }
        if (settled.failure && settled.hold) {
          held = settled.failure;
          continue;
        }
        if (settled.failure && patched(PATCHES.rollback)) return rollBack(settled.failure);
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
