// Whether an upgrade's new version works. A pod on the new template that crash-loops, or the pod
// the upgrade restarted last that is not Ready and live within the progress deadline, makes the
// upgrade fail (spec.upgrade.onFailure says whether it then holds or rolls back). A canary is the
// first pod on the new version, watched for a while before the next pod moves: it has to stay the
// same pod, running, Ready, live and caught up (and a write has to commit through it, which the
// activity checks).
import { goDuration, lagText } from './format.ts';
import { nodeDownProblem } from './gates.ts';
import { memberOf, podAt, type Observation, type PodObservation } from './observation.ts';

/** The pod the upgrade restarted last, and when its successor came (ms since the epoch). */
export interface ProgressWatch {
  ordinal: number;
  since: number;
}

/** A pod that runs, is Ready and whose node the leader hears from. */
export function readyAndLive(obs: Observation, ordinal: number): boolean {
  const pod = podAt(obs, ordinal);
  if (!pod || pod.terminating || !pod.running || !pod.ready) return false;
  return !!memberOf(obs.membership, ordinal + 1)?.live;
}

/** What keeps a pod from being Ready and live, in words. */
export function notReadyAndLive(obs: Observation, ordinal: number): string {
  const pod = podAt(obs, ordinal);
  const down = nodeDownProblem(pod);
  if (down) return down;
  if (!pod || pod.terminating) return `pod ${ordinal} is not there`;
  if (!pod.running) return `pod ${ordinal} is not running${pod.waitingReason ? ` (${pod.waitingReason})` : ''}`;
  if (!pod.ready) return `pod ${ordinal} is not Ready`;
  return `the leader has not heard from node ${ordinal + 1}`;
}

/**
 * What the end of a replacement waits for, in words: its node a voter again, live, and its pod
 * Ready; null once they are. A stopped node under the pod is named with what a person can do.
 */
export function replacedVoterWait(obs: Observation, ordinal: number, nodeId: number): string | null {
  const member = memberOf(obs.membership, nodeId);
  const pod = podAt(obs, ordinal);
  if (member?.voter && member.live && pod?.ready) return null;
  const why = member?.voter ? notReadyAndLive(obs, ordinal) : (nodeDownProblem(pod) ?? `node ${nodeId} is not a voter yet`);
  return `waiting for pod ${ordinal} to be a Ready voter: ${why}`;
}

const exited = (pod: PodObservation) =>
  `its container exited${pod.lastExitCode === null ? '' : ` with code ${pod.lastExitCode}`} (${pod.restarts} ${pod.restarts === 1 ? 'restart' : 'restarts'})`;

export interface FailureCheck {
  obs: Observation;
  /** The version the new template runs, for the words. */
  version: string;
  /** The pod restarted last, while it has not yet been seen Ready and live. */
  watch: ProgressWatch | null;
  deadlineMs: number;
}

/**
 * Why the new version fails, or null: a pod on the new template crash-loops (exit code 75 once,
 * a node loading a snapshot, is normal and is no loop), or the pod restarted last is still not
 * Ready and live once the deadline has passed since its successor came.
 */
export function newVersionFailure(c: FailureCheck): string | null {
  const { obs } = c;
  for (const pod of [...obs.pods].sort((a, b) => a.ordinal - b.ordinal)) {
    if (pod.terminating || pod.hash !== obs.wantedHash) continue;
    if (pod.waitingReason === 'CrashLoopBackOff') return `pod ${pod.ordinal} crash-loops on ${c.version}: ${exited(pod)}`;
  }
  if (c.watch) {
    const pod = podAt(obs, c.watch.ordinal);
    const onNew = !!pod && !pod.terminating && pod.hash === obs.wantedHash;
    // A pod whose node stopped reporting, or that no scheduler placed, says nothing about the
    // version: the wait names the node, or the missing scheduler.
    // The deadline runs from the restart, or from when the pod was placed if that came later.
    const from = Math.max(c.watch.since, pod?.scheduledAt ?? 0);
    if (onNew && !pod.nodeDown && !pod.notPlaced && !readyAndLive(obs, c.watch.ordinal) && obs.at - from > c.deadlineMs) {
      return `pod ${c.watch.ordinal} did not become Ready and live on ${c.version} within ${goDuration(c.deadlineMs)}: ${notReadyAndLive(obs, c.watch.ordinal)}`;
    }
  }
  return null;
}

/** The canary as its soak began: the pod (by uid) and how often its container had restarted. */
export interface CanaryStart {
  ordinal: number;
  uid: string;
  restarts: number;
}

export interface CanaryProblem {
  reason: string;
  /** A problem that is a verdict at once (the pod restarted or was replaced); others must be seen twice in a row. */
  fatal: boolean;
  /** No verdict on the version at all (the pod's node stopped reporting): the soak waits while it lasts. */
  waits?: boolean;
}

/** What is wrong with the canary now, if anything (the write through it is the activity's to try). */
export function canaryProblem(obs: Observation, start: CanaryStart, caughtUpEntries: number): CanaryProblem | null {
  const o = start.ordinal;
  const pod = podAt(obs, o);
  if (!pod || pod.uid !== start.uid) return { reason: `pod ${o} was replaced`, fatal: true };
  // A node that stops reporting says nothing about the version: the soak waits, naming the node.
  if (pod.nodeDown) return { reason: nodeDownProblem(pod)!, fatal: false, waits: true };
  if (pod.terminating) return { reason: `pod ${o} is stopping`, fatal: true };
  if (pod.restarts > start.restarts) return { reason: `pod ${o} restarted: ${exited(pod)}`, fatal: true };
  if (!pod.running) return { reason: `pod ${o} is not running`, fatal: true };
  if (!pod.ready) return { reason: `pod ${o} is not Ready`, fatal: true };
  const m = memberOf(obs.membership, o + 1);
  if (!m || !m.live) return { reason: `the leader has not heard from node ${o + 1}`, fatal: false };
  if (m.lag === null || m.lag > caughtUpEntries) return { reason: `node ${o + 1} is behind the leader${lagText(m.lag)}`, fatal: false };
  return null;
}

/** A canary is ready to soak: on the new template, Ready, live and caught up. */
export function canaryUp(obs: Observation, ordinal: number, caughtUpEntries: number): boolean {
  const pod = podAt(obs, ordinal);
  if (!pod || pod.hash !== obs.wantedHash || !readyAndLive(obs, ordinal)) return false;
  const m = memberOf(obs.membership, ordinal + 1);
  return !!m && m.lag !== null && m.lag <= caughtUpEntries;
}

/** The time left of a soak in whole steps of 5 s, so the status line changes at most every 5 s. */
export function timeLeftText(ms: number): string {
  return goDuration(Math.max(5, Math.ceil(ms / 5000) * 5) * 1000);
}
