// What the cluster's own disruption budget cannot tell apart. It counts every pod it selects, and a
// pod that is not Ready uses up what it allows; the quorum counts the membership's nodes only. A
// pod whose node has left the membership (its removal committed; the pod goes with the
// StatefulSet's scale-down, after the other nodes that leave) is often not Ready: its broker is no
// member any more, or it never heard that it was removed. While it is, the budget refuses every
// eviction, and a leaving leader's pod, stopped once to hand leadership away before its own
// removal, would wait for good (seen in a soak: 5→3, node 5 removed, then node 4 elected).
import { podAt, type Observation } from './observation.ts';

/**
 * The pods that keep the budget from letting `target` go although the stop gate did: not Ready, and
 * their nodes no members. Null unless they are all that is short: every member's pod other than
 * `target` runs and is Ready, and at least one non-member's pod is not.
 */
export function nonMembersHoldingBudget(obs: Observation, target: number): number[] | null {
  const m = obs.membership;
  if (!m) return null;
  const members = new Set([...m.voters, ...m.learners, ...(m.joint ?? []).flat()]);
  for (const id of members) {
    const pod = podAt(obs, id - 1);
    if (id - 1 !== target && (!pod || !pod.ready || pod.terminating)) return null;
  }
  const holding = obs.pods.filter((p) => p.ordinal !== target && !members.has(p.ordinal + 1) && (!p.ready || p.terminating)).map((p) => p.ordinal);
  return holding.length > 0 ? holding.sort((a, b) => a - b) : null;
}
