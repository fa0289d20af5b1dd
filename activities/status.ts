// What the observation says in status: leader, term, voters, members, version. Pure functions,
// written by the observer with a merge patch.
import type { Condition, MemberStatus, Phase, QueenClusterStatus } from '../crd/schema.ts';
import type { Observation } from '../workflows/plan/observation.ts';
import { behindSince, type StallMemory } from '../workflows/plan/stalls.ts';
import { imageTag } from './resources.ts';

/**
 * The version a pod runs: what its broker says on /health, else its image's tag (an image pinned
 * by digest alone has none: its version is known once the broker answers).
 */
export function podVersion(obs: Observation, ordinal: number): string | null {
  const h = obs.health[ordinal];
  if (h?.version) return h.version;
  const image = obs.pods.find((p) => p.ordinal === ordinal)?.image;
  return image ? imageTag(image) : null;
}

/** status.version: the version every pod reports, empty while any pod is missing, silent or different. */
export function commonVersion(obs: Observation, podCount: number): string {
  let version: string | null = null;
  for (let i = 0; i < podCount; i++) {
    const v = obs.health[i]?.version;
    if (!v) return '';
    if (version !== null && v !== version) return '';
    version = v;
  }
  return version ?? '';
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** One entry per pod ordinal of the StatefulSet, and per member without a pod. */
export function memberStatuses(obs: Observation, memory: StallMemory): MemberStatus[] {
  const podCount = Math.max(obs.statefulSet?.replicas ?? 0, obs.voters, ...obs.pods.map((p) => p.ordinal + 1));
  const ids = new Set<number>();
  for (let i = 0; i < podCount; i++) ids.add(i + 1);
  for (const m of obs.membership?.members ?? []) ids.add(m.nodeId);
  return [...ids]
    .sort((a, b) => a - b)
    .map((nodeId) => {
      const ordinal = nodeId - 1;
      const pod = obs.pods.find((p) => p.ordinal === ordinal);
      const member = obs.membership?.members.find((m) => m.nodeId === nodeId);
      const entry: MemberStatus = {
        nodeId,
        pod: `${obs.name}-${ordinal}`,
        voter: !!member?.voter,
        learner: !!member && !member.voter,
        live: !!member?.live,
        ready: !!pod?.ready,
        lag: member?.lag ?? null,
        matched: member?.matched ?? null,
        behindSince: member ? iso(behindSince(memory, nodeId, member.lag)) : null,
        restarts: pod?.restarts ?? 0,
        lastExitCode: pod?.lastExitCode ?? null,
      };
      const version = podVersion(obs, ordinal);
      if (version && obs.health[ordinal]) entry.version = version;
      return entry;
    });
}

/** The observed part of the status. Without a leader's view, leader and term are null rather than stale. */
export function observedStatus(obs: Observation, memory: StallMemory): Partial<QueenClusterStatus> {
  const podCount = Math.max(obs.statefulSet?.replicas ?? 0, obs.voters);
  const out: Partial<QueenClusterStatus> = {
    version: commonVersion(obs, podCount),
    members: memberStatuses(obs, memory),
    leader: obs.membership?.leader ?? null,
    term: obs.membership?.term ?? null,
  };
  if (obs.membership) {
    out.voters = obs.membership.voters;
    out.learners = obs.membership.learners;
  }
  return out;
}

export const READY_MESSAGE = 'every voter is in place and the cluster commits';

/** The Ready condition for a phase and message; its transition time moves only when it flips. */
export function readyCondition(prev: Condition[] | undefined, phase: Phase, message: string, generation: number | undefined, now: Date): Condition[] {
  const ready = phase === 'Ready';
  const old = prev?.find((c) => c.type === 'Ready');
  const status = ready ? 'True' : 'False';
  return [
    {
      type: 'Ready',
      status,
      reason: phase,
      message: ready ? READY_MESSAGE : message,
      observedGeneration: generation,
      lastTransitionTime: old && old.status === status ? old.lastTransitionTime : now.toISOString(),
    },
  ];
}
