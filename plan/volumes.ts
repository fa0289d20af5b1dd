// The next step towards volumes of spec.storage.size. Every claim asks for the new size, all in one
// step (the storage grows them side by side); a volume whose file system waits for its pod to
// restart gets that restart (one at a time, through the stop gate, as in an upgrade); then the
// StatefulSet is created again around its running pods with the new claim template, since a
// StatefulSet's claim template cannot be edited.
// Every step carries the size it works towards, read from the spec at that step: a second raise
// during a grow retargets it. The re-creation carries the pod count of the StatefulSet it replaces.
import { podAt, type Observation } from './observation.ts';
import { podsText } from './format.ts';
import { nodeDownProblem, type GateName } from './gates.ts';

export type VolumeStep =
  | { kind: 'done'; size: string }
  | { kind: 'wait'; message: string; gate: GateName; phase?: 'Blocked' }
  // One claim a step, as runs before 'expand-claims' recorded it: taken when such a history replays.
  | { kind: 'expand'; ordinal: number; claimName: string; claimUid: string; size: string; message: string }
  | { kind: 'expand-claims'; claims: ClaimToExpand[]; size: string; message: string }
  | { kind: 'restart'; ordinal: number; message: string; next: string }
  | { kind: 'recreate'; pods: number; size: string; message: string };

/** A claim that asks for less than the size wanted, with its own step line (and Event). */
export interface ClaimToExpand {
  ordinal: number;
  claimName: string;
  claimUid: string;
  message: string;
}

/**
 * How long a file system waiting for its node (FileSystemResizePending) is given to grow online
 * before its pod is restarted, unless the node says sooner that it cannot (NodeResizeError).
 */
export const ONLINE_EXPANSION_MS = 20_000;

/**
 * `restarted`: the pods this grow restarted; it ends once they are Ready again, as an upgrade ends
 * with its voters back (the StatefulSet's re-creation does not wait for them). `checked`, when
 * given, collects the gates looked at on the way to the step returned (plan/steps.ts volumeStep).
 */
export function nextVolumeStep(
  obs: Observation,
  size: string,
  sizeBytes: number,
  templateBytes: number,
  restarted: readonly number[] = [],
  checked: GateName[] = [],
): VolumeStep {
  const sts = obs.statefulSet;
  checked.push('statefulset-present');
  if (!sts || sts.terminating) {
    return { kind: 'wait', message: `the StatefulSet ${obs.name} is gone: the cluster has to be formed again`, gate: 'statefulset-present' };
  }
  const smaller = obs.claims.filter((c) => !c.terminating && c.requestBytes < sizeBytes).sort((a, b) => a.ordinal - b.ordinal);
  if (smaller.length > 0) {
    const claims = smaller.map((c) => ({ ordinal: c.ordinal, claimName: c.name, claimUid: c.uid, message: `growing the volume of pod ${c.ordinal} to ${size}` }));
    const message = `growing the volume${claims.length > 1 ? 's' : ''} of ${podsText(claims.map((c) => c.ordinal))} to ${size}`;
    return { kind: 'expand-claims', claims, size, message };
  }
  for (const c of obs.claims) {
    if (c.terminating || c.capacityBytes === 0 || c.capacityBytes >= sizeBytes) continue;
    checked.push('volume-can-grow', 'volume-grown');
    // Accepted by the API server, then refused by the storage: only a person can change that.
    if (c.resizeInfeasible) {
      return {
        kind: 'wait',
        phase: 'Blocked',
        message: `the volume of pod ${c.ordinal} cannot grow to ${size}: ${c.resizeError ?? 'its storage refuses that size'}`,
        gate: 'volume-can-grow',
      };
    }
    if (!c.resizePending) {
      if (c.resizeError) {
        return { kind: 'wait', message: `the volume of pod ${c.ordinal} is growing to ${size}, but its storage fails and tries again: ${c.resizeError}`, gate: 'volume-grown' };
      }
      return { kind: 'wait', message: `the volume of pod ${c.ordinal} is growing to ${size}`, gate: 'volume-grown' };
    }
    const pod = podAt(obs, c.ordinal);
    // A node that expands a mounted volume's file system by itself (online) does so within
    // moments: a restart is for the file systems that wait for one. A node that said it could not
    // (NodeResizeError) while this pod ran needs no more moments.
    const failedOnline = c.onlineGrowthFailedAt != null && pod?.scheduledAt != null && c.onlineGrowthFailedAt > pod.scheduledAt;
    if (!failedOnline && c.resizePendingSince != null && obs.at - c.resizePendingSince < ONLINE_EXPANSION_MS) {
      return { kind: 'wait', message: `the file system of pod ${c.ordinal}'s volume is growing to ${size}`, gate: 'volume-grown' };
    }
    // A pod that has not started yet (the successor of a restart, or a pod the StatefulSet is
    // making) grows the file system as it mounts the volume: restarting it would only stop it again.
    if (!pod || pod.terminating || pod.phase === 'Pending') {
      return { kind: 'wait', message: `the file system of pod ${c.ordinal}'s volume grows to ${size} as pod ${c.ordinal} starts`, gate: 'volume-grown' };
    }
    return {
      kind: 'restart',
      ordinal: c.ordinal,
      message: `restarting pod ${c.ordinal} to finish growing its volume`,
      next: `pod ${c.ordinal} must restart to finish growing its volume`,
    };
  }
  if (templateBytes < sizeBytes) {
    return { kind: 'recreate', pods: sts.replicas, size, message: `recreating the StatefulSet with ${size} volumes; its pods keep running` };
  }
  checked.push('pod-ready');
  const starting = [...new Set(restarted)].filter((o) => {
    const pod = podAt(obs, o);
    return !pod || pod.terminating || !pod.ready;
  });
  if (starting.length > 0) {
    // A pod on a node that stopped reporting starts only when the node is back (or is marked out of
    // service): status names the node and what a person can do, as every other wait does.
    const down = starting.map((o) => nodeDownProblem(podAt(obs, o))).find((m) => m !== null);
    if (down) return { kind: 'wait', message: down, gate: 'pod-ready' };
    const several = starting.length > 1;
    return {
      kind: 'wait',
      message: `${podsText(starting.sort((a, b) => a - b))} ${several ? 'are' : 'is'} not Ready yet after ${several ? 'their restarts' : 'its restart'}`,
      gate: 'pod-ready',
    };
  }
  return { kind: 'done', size };
}
