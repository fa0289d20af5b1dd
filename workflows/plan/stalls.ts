// Which voter is behind the leader and does not move. A voter whose volume was wiped, or put back
// from a copy, without being removed first comes back under its id and never catches up: the
// leader keeps its old `matched` for it. It costs the cluster one voter of fault tolerance, so no
// pod is stopped while one exists, and a person is told it has to be replaced.
//
// The memory (per node: the last `matched` seen and since when) is plain data: the observer keeps
// it across operator restarts (in status.members) and every gate starts from it.
import { memberOf, type MembershipObservation, type Observation, podAt, type PodObservation } from './observation.ts';

export interface StallEntry {
  matched: number | null;
  /** When `matched` was first seen at this value (ms since the epoch). */
  since: number;
}

export type StallMemory = Record<string, StallEntry>;

export const DEFAULT_STALL_AFTER_MS = 10_000;

/**
 * The memory after one more look at the membership: unchanged `matched` keeps its time. With
 * `answering` (the nodes whose pods answered /health), the clock of a node that does not answer
 * starts again: a broker that replays its store at boot keeps its port closed for as long as that
 * takes, and only the time it has been up without moving counts.
 */
export function trackStalls(prev: StallMemory, membership: MembershipObservation | null, now: number, answering?: ReadonlySet<number>): StallMemory {
  if (!membership) return prev;
  const next: StallMemory = {};
  for (const m of membership.members) {
    const old = prev[String(m.nodeId)];
    const keep = old && old.matched === m.matched && (!answering || answering.has(m.nodeId));
    next[String(m.nodeId)] = keep ? old : { matched: m.matched, since: now };
  }
  return next;
}

/** The node ids whose pods answered /health in this observation. */
export function answeringNodes(obs: Pick<Observation, 'health'>): Set<number> {
  return new Set(Object.keys(obs.health).map((ordinal) => Number(ordinal) + 1));
}

/**
 * A voter is stalled when its pod runs and answers, the leader has a `matched` for it that is
 * behind and has not moved for `stallAfterMs` while it answered. A node receiving a snapshot is not stalled: its `matched` is
 * unknown (null) while the snapshot is in flight, and it restarts once with exit code 75 to load it.
 */
export function isStalled(obs: Observation, memory: StallMemory, nodeId: number, stallAfterMs: number): boolean {
  const member = memberOf(obs.membership, nodeId);
  if (!member || !member.voter || member.matched === null) return false;
  if (member.lag === null || member.lag <= 0) return false;
  if (obs.membership?.leader === nodeId) return false;
  const pod = podAt(obs, nodeId - 1);
  if (!pod || !pod.running || pod.terminating) return false;
  // A node that does not answer cannot be judged: it may be booting (replaying its store) or down,
  // which the other gates say.
  if (!obs.health[pod.ordinal]) return false;
  if (loadingSnapshot(pod, obs.at, stallAfterMs)) return false;
  const entry = memory[String(nodeId)];
  if (!entry || entry.matched !== member.matched) return false;
  return obs.at - entry.since >= stallAfterMs;
}

/** The pod restarted to load a snapshot (exit code 75) a moment ago. */
export function loadingSnapshot(pod: PodObservation, now: number, windowMs: number): boolean {
  return pod.lastExitCode === 75 && pod.lastExitAt !== null && now - pod.lastExitAt < windowMs;
}

/** `behindSince` for status: since when a node that is behind has not moved; null when it moves or is caught up. */
export function behindSince(memory: StallMemory, nodeId: number, lag: number | null): number | null {
  const entry = memory[String(nodeId)];
  if (!entry || entry.matched === null || lag === null || lag <= 0) return null;
  return entry.since;
}

/** Memory restored from status.members, so a restarted operator knows for how long a voter has not moved. */
export function stallMemoryFromStatus(
  members: readonly { nodeId: number; matched?: number | null; behindSince?: string | null }[] | undefined,
  now: number,
): StallMemory {
  const memory: StallMemory = {};
  for (const m of members ?? []) {
    if (m.matched === undefined) continue;
    const since = m.behindSince ? Date.parse(m.behindSince) : NaN;
    memory[String(m.nodeId)] = { matched: m.matched, since: Number.isFinite(since) ? since : now };
  }
  return memory;
}
