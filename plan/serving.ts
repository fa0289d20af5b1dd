// Which pods take client connections. A pod is drained (its serving label "false", out of the
// client Services' endpoints) only for the moments before its node leaves the membership or its
// pod goes for good (activities/drain.ts). A pod whose node is a member serves again as soon as no
// step drains it: after a removal that did not happen (the gate closed again, the target changed,
// the operation was cancelled or ended from outside). A pod whose node is not a member stays out:
// it is about to go, or its node left and it can no longer commit what it is sent. A pod without
// the label was made before the label existed: it serves, as it did. While a scale-down runs, the
// pods of the nodes it removes stay out too: they were drained together, before the first left.
import { memberOf, type Observation, type PodObservation } from './observation.ts';

/**
 * The pods whose serving label should be set to "true" now, when no step is draining one.
 * `voters`: the voters a scale-down works towards; the pods of the nodes above it stay out.
 */
export function podsToServe(obs: Observation, voters?: number): PodObservation[] {
  return obs.pods.filter((p) => {
    if (p.terminating || p.serving === true) return false;
    if (voters !== undefined && p.ordinal + 1 > voters && p.serving === false) return false;
    if (p.serving === null) return true;
    // Without a leader's view nobody can tell whether its node is a member: left as it is.
    return obs.membership !== null && memberOf(obs.membership, p.ordinal + 1) !== undefined;
  });
}
