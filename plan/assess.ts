// The cluster's state in one phase and one line, when no operation runs: Ready, Degraded with the
// reason when a pod is down or a voter is behind, Blocked when only a person can decide, Forming
// before the first leader. Phases are not sticky: this is computed afresh from every observation.
import type { Phase, QueenClusterSpec, QueenClusterStatus } from '../crd/schema.ts';
import { standbyAssessment } from './link.ts';
import { imagePullProblem, nodeDownProblem, stopGate, type GateName } from './gates.ts';
import type { Observation, PodObservation } from './observation.ts';
import type { StallMemory } from './stalls.ts';

export interface Assessment {
  phase: Phase;
  message: string;
  /** The named gate or check behind a Degraded or Blocked phase. */
  reason?: GateName;
}

export interface AssessInput {
  obs: Observation;
  memory: StallMemory;
  /** A leader's membership has been seen before (status.voters is set). */
  formed: boolean;
  /** The last write probe, if it ran. */
  probe: { ok: boolean; error?: string } | null;
  stallAfterMs: number;
  secretName: string;
  /** Why the last operation cannot go on by itself (cancelled, failed), if it still applies. */
  stoppedOperation?: string | null;
  /** spec.standby: a standby rests in Standby while it follows its source, Degraded while it does not. */
  standby?: QueenClusterSpec['standby'];
  /** status.fence: a source a switchover took out of its clients' reach (it rests Fenced). */
  fence?: QueenClusterStatus['fence'];
}

/** What the kubelet says about a container that cannot start because of its Secret, in our words. */
export function podConfigProblem(pod: PodObservation, secretName: string): string | null {
  if (pod.waitingReason !== 'CreateContainerConfigError') return null;
  const msg = pod.waitingMessage ?? '';
  const missingSecret = /secret "([^"]+)" not found/.exec(msg);
  if (missingSecret) {
    const what = missingSecret[1] === secretName ? 'with the key QUEEN_RAFT_TOKEN' : 'with the key the spec names (the link token)';
    return `the Secret ${missingSecret[1]} does not exist: create it ${what} (pod ${pod.ordinal} cannot start)`;
  }
  const missingKey = /couldn't find key (\S+) in Secret (\S+)/.exec(msg);
  if (missingKey) {
    const secret = missingKey[2]!.split('/').pop();
    return `the Secret ${secret ?? secretName} has no key ${missingKey[1]}: add it (pod ${pod.ordinal} cannot start)`;
  }
  return `pod ${pod.ordinal} cannot start: ${msg || 'its container configuration is invalid'}`;
}

/** A crash loop: the kubelet backs off restarting the container. Exit code 75 once is normal, a loop is not. */
export function crashLoop(pod: PodObservation): string | null {
  if (pod.waitingReason !== 'CrashLoopBackOff') return null;
  const code = pod.lastExitCode === null ? '' : ` with code ${pod.lastExitCode}`;
  return `pod ${pod.ordinal} is crash-looping: its container exited${code} (${pod.restarts} restarts)`;
}

/**
 * Why a pod that should start does not, as a person can act on it: its node does not report (the
 * pod, or its predecessor still stopping there, is stuck), it cannot be scheduled (an unbound
 * claim, no node that fits), its image cannot be pulled, or it crash-loops; null when
 * nothing says (it may simply still be starting).
 */
export function podStartProblem(pod: PodObservation | undefined): string | null {
  const down = nodeDownProblem(pod);
  if (down) return down;
  if (!pod || pod.terminating) return null;
  if (pod.unschedulable) return `pod ${pod.ordinal} cannot be scheduled: ${pod.unschedulable}`;
  if (pod.notPlaced) return `pod ${pod.ordinal} is not scheduled: ${pod.notPlaced}`;
  return imagePullProblem(pod) ?? crashLoop(pod);
}

export function assess(input: AssessInput): Assessment {
  const { obs } = input;
  if (input.fence) {
    return { phase: 'Fenced', message: `taken out of its clients' reach by the switchover to ${input.fence.by}: it becomes a standby of it`, reason: 'source-fenced' };
  }
  for (const pod of obs.pods) {
    const problem = podConfigProblem(pod, input.secretName);
    if (problem) return { phase: 'Blocked', message: problem, reason: 'pod-config' };
  }
  for (const pod of obs.pods) {
    if (obs.health[pod.ordinal]?.applyFailure) {
      return { phase: 'Blocked', message: `apply stopped on pod ${pod.ordinal}: this needs a person, see the recovery guide`, reason: 'apply-running' };
    }
  }
  // The brokers refuse the operator's credentials (JWT_ENABLED): only a person can fix that.
  if (!obs.membership && obs.brokerAuth) return { phase: 'Blocked', message: obs.brokerAuth, reason: 'broker-credentials' };
  if (!obs.membership) {
    if (!input.formed) return { phase: 'Forming', message: 'waiting for the pods to start and elect a leader', reason: 'forming' };
    return {
      phase: 'Degraded',
      message: "no pod answers with a leader's view of the membership: an election is under way, or the cluster lost its majority",
      reason: 'leader-known',
    };
  }
  if (input.stoppedOperation) return { phase: 'Blocked', message: input.stoppedOperation, reason: 'last-operation' };
  for (const pod of obs.pods) {
    const loop = crashLoop(pod);
    if (loop) return { phase: 'Degraded', message: loop, reason: 'crash-loop' };
    const pull = imagePullProblem(pod);
    if (pull) return { phase: 'Degraded', message: pull, reason: 'image-pull' };
    if (pod.unschedulable) return { phase: 'Degraded', message: `pod ${pod.ordinal} cannot be scheduled: ${pod.unschedulable}`, reason: 'unschedulable' };
    if (pod.notPlaced) return { phase: 'Degraded', message: `pod ${pod.ordinal} is not scheduled: ${pod.notPlaced}`, reason: 'unschedulable' };
  }
  // The voters are the membership's here: one the spec asks for that is not a member yet (pods
  // made, their nodes not added) is the next operation's to add, which starts at once (between a
  // FormCluster that formed on one voter and the ScaleVoters after it), not a fault of the cluster.
  const hold = stopGate({
    obs: { ...obs, voters: 0 },
    memory: input.memory,
    target: null,
    opts: { minReadyMs: 0, stallAfterMs: input.stallAfterMs, caughtUpEntries: obs.membership.promoteMaxLag },
  });
  if (hold) return { phase: 'Degraded', message: hold.reason, reason: hold.gate };
  const standby = standbyAssessment(obs, { standby: input.standby }, obs.namespace);
  if (standby && standby.phase !== 'Standby') return standby;
  if (input.probe && !input.probe.ok) {
    return { phase: 'Degraded', message: `a write does not commit: ${input.probe.error ?? 'the write probe failed'}`, reason: 'write-commits' };
  }
  return standby ?? { phase: 'Ready', message: '' };
}
