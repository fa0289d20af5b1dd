// A fix-forward: a build that is not Ready on any pod that runs it, although its brokers are live,
// caught up and commit writes (its health check fails: a new format found broken only once the
// leader raised the cluster's catalogue version, with no way back), and a person names a fixed
// build. The stop gate wants every other voter's pod Ready before a pod stops; none of the old
// build's ever will be, so the upgrade would wait for good, and only pods deleted by hand would
// move it. Here the Ready checks of those pods are waived, when stopping the pod provably cuts no
// client off and leaves the voters that stay as able to commit as any other stop would:
// - the pod to stop is not Ready (no client Service sends it anything), and its restart moves it
//   onto the StatefulSet's template (its successor runs another build);
// - no pod on another template than the StatefulSet's is Ready: the build being left is not Ready
//   anywhere, which is the build's doing and not one pod's, and none of its pods serves a client;
// - the waiver covers only those pods: a pod already on the StatefulSet's template is held to the
//   whole gate (Ready for minReadySeconds), so the fixed build proves itself before the next stop;
// - every other gate holds as always (plan/gates.ts): the leader known, no membership change in
//   flight, every other voter's pod running, its node live and caught up as the leader sees it,
//   none stalled; and a write commits through a pod that stays (activities/gate.ts).
// Never for a node that leaves the membership: a removal is no restart onto a fixed build.
import { podsText } from './format.ts';
import type { Observation } from './observation.ts';

export interface FixForward {
  /** The pod to stop. */
  target: number;
  /** The other pods whose Ready checks are waived: on the build being left, none of them Ready. */
  waived: number[];
  /** No pod of the cluster is Ready: no client is served by any. */
  noneReady: boolean;
}

/**
 * Whether stopping `target` waives the Ready checks of other pods, and whose; null when it does
 * not (the rule above does not hold, or no other pod needs it: the whole gate applies).
 */
export function fixForward(obs: Observation, target: number | null, removing = false): FixForward | null {
  const to = obs.statefulSet?.templateHash;
  if (target === null || removing || !to) return null;
  const pods = obs.pods.filter((p) => !p.terminating);
  const self = pods.find((p) => p.ordinal === target);
  if (!self || self.ready || self.hash === to) return null;
  const left = pods.filter((p) => p.hash !== to);
  if (left.some((p) => p.ready)) return null;
  const waived = left.filter((p) => p.ordinal !== target).map((p) => p.ordinal);
  if (waived.length === 0) return null;
  return { target, waived: waived.sort((a, b) => a - b), noneReady: !pods.some((p) => p.ready) };
}

/**
 * Why the pod stops although others are not Ready, in one line after the step's own words:
 * "although no pod is Ready: ...".
 */
export function fixForwardText(f: FixForward): string {
  const which = f.noneReady ? 'no pod is Ready' : `${podsText(f.waived)} ${f.waived.length === 1 ? 'is' : 'are'} not Ready`;
  return (
    `although ${which}: the version it leaves is Ready on none of its pods, while the voters that stay are live, caught up and commit writes; ` +
    `pod ${f.target} serves no client, so stopping it cuts none off`
  );
}

/** A stop's line, with why it goes although other pods are not Ready when a fix-forward lets it through. */
export const withFixForward = (line: string, f: FixForward | null): string => (f ? `${line} ${fixForwardText(f)}` : line);
