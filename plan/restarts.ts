// Which pod a rolling upgrade restarts next. A pod on an old template that is not Ready goes
// first, whatever its ordinal: it serves nobody and the new template may be what repairs it (of
// several, the ones that do not lead first: a build not Ready on any pod keeps the leader for the
// end). Then the pods that do not lead, from the highest ordinal down, and the leader last, so
// leadership moves once.
import type { Observation, PodObservation } from './observation.ts';

export interface RestartPick {
  ordinal: number;
  podName: string;
  podUid: string;
  why: 'not-ready' | 'follower' | 'leader';
}

/** Pods that run an old template: they exist, are not stopping, and carry another hash. */
export function outdatedPods(obs: Observation): PodObservation[] {
  return obs.pods
    .filter((p) => !p.terminating && p.hash !== obs.wantedHash)
    .sort((a, b) => b.ordinal - a.ordinal);
}

export function nextRestart(obs: Observation): RestartPick | null {
  const candidates = outdatedPods(obs);
  if (candidates.length === 0) return null;
  const leaderOrdinal = obs.membership?.leader != null ? obs.membership.leader - 1 : -1;
  const pick = (p: PodObservation, why: RestartPick['why']): RestartPick => ({ ordinal: p.ordinal, podName: p.name, podUid: p.uid, why });
  const broken = candidates.find((p) => !p.ready && p.ordinal !== leaderOrdinal) ?? candidates.find((p) => !p.ready);
  if (broken) return pick(broken, 'not-ready');
  const follower = candidates.find((p) => p.ordinal !== leaderOrdinal);
  if (follower) return pick(follower, 'follower');
  return pick(candidates[0]!, 'leader');
}
