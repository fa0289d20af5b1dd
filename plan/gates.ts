// The stop gate: the named conditions that hold a disruptive step (stopping a pod) back, shared
// by every operation. Each gate returns the reason it holds, in the words of the README, or null.
// The target pod is the one about to be stopped: the other voters must carry the cluster without it.
// A node about to leave the membership passes the same gate (`removing`): the voters that stay
// must carry the cluster without it, so a removal never leaves two voters that cannot commit.
// A fix-forward waives the Ready checks of the pods on a build that is Ready on none of them
// (plan/fix-forward.ts).
import { fixForward } from './fix-forward.ts';
import { goDuration, lagText } from './format.ts';
import { memberOf, type Observation, podAt, type PodObservation } from './observation.ts';
import { isStalled, type StallMemory } from './stalls.ts';

export interface GateOptions {
  /** spec.minReadySeconds, in ms (0 for the settled check). */
  minReadyMs: number;
  stallAfterMs: number;
  /** A voter is caught up when the leader sees it at most this many entries behind. */
  caughtUpEntries: number;
}

export interface GateContext {
  obs: Observation;
  memory: StallMemory;
  /** Ordinal of the pod about to be stopped, or null to ask whether the cluster is settled. */
  target: number | null;
  opts: GateOptions;
  /**
   * The target's node is about to leave the membership rather than stop: its own stall holds
   * nothing back (a voter that does not catch up is often the very node being replaced).
   */
  removing?: boolean;
}

export interface GateHold {
  gate: GateName;
  reason: string;
  /** When this gate opens by time alone, if nothing else changes (ms since the epoch, as obs.at). */
  liftsAt?: number;
}

export const GATE_NAMES = [
  'leader-known',
  'apply-running',
  'no-change-in-flight',
  'pod-running',
  'voter-not-stalled',
  'pod-ready',
  'pod-ready-for-min-ready-seconds',
  'voter-live',
  'voter-caught-up',
  'write-commits',
  'not-paused',
  'approved',
  // An upgrade's new version: the canary's soak, and the hold after a failure (onFailure: Hold).
  'canary-soaked',
  'new-version-healthy',
  // Waits of the voter, replacement and volume steps that a plan names too.
  'learner-caught-up',
  'pod-gone',
  'claim-exists',
  'old-volume-gone',
  'volume-grown',
  'statefulset-deleted',
  'statefulset-present',
  'statefulset-recreated',
  'worker-polling',
  // A step whose attempts keep failing (timing out, or the workflow code failing on the workers).
  'step-succeeds',
  // A pod drained before its node leaves the membership or its pod goes for good: out of the
  // client Services' endpoints, then the requests in flight on it finish.
  'pod-out-of-endpoints',
  'requests-drained',
  // Evictions the PodDisruptionBudget refuses for now (another disruption is under way).
  'disruption-budget',
  // Holds only a person can lift (the phase is Blocked): objects someone else owns, a
  // replacement whose annotation changed, a membership change the leader refuses, a volume the
  // storage cannot grow, the Admin token the brokers want.
  'objects-ours',
  'replace-target',
  // A restore (spec.bootstrap.fromBackup) whose backup is not ready, failed or gone, or whose pod 0
  // claim is another's: a person names another backup, or deletes the claim.
  'backup-ready',
  'membership-change',
  'volume-can-grow',
  'broker-credentials',
  // A pod on a node that does not report, or reports NotReady: it neither stops nor starts until
  // the node is back, or a person says it is off for good.
  'node-down',
  // A version whose build reads less than the cluster's catalogue version cannot start on it (a
  // revert, a rollback after the raise): lifted by a person naming a version that can (plan/door.ts).
  'version-can-boot',
  // What the phase at rest names when it is Degraded or Blocked (status.operation is not set).
  'pod-config',
  'crash-loop',
  'image-pull',
  'unschedulable',
  'forming',
  'last-operation',
  // A backup's waits: the cluster's running operation to end (a backup does not take a volume
  // while an operation moves pods and members), a voter caught up to take the volume of, the
  // VolumeSnapshot ready.
  'no-operation-running',
  'backup-source-caught-up',
  'snapshot-ready',
  // The cluster link (plan/link.ts): a standby that does not follow its source (it rests Degraded);
  // a promotion asked with `true` while the source still answers the standby (Blocked: a person
  // stops the source, or asks for `force` or a switchover); a switchover's source out of its
  // clients' reach and its requests drained; the standby caught up with the source's last entry.
  'standby-follows',
  'source-stopped',
  'source-fenced',
  'standby-caught-up',
  // An upgrade of a source held until its standbys run the new version (a person upgrades them).
  'standby-upgraded-first',
] as const;
export type GateName = (typeof GATE_NAMES)[number];

/**
 * Who lifts a gate that holds, which decides how an operation waits on it:
 * - `machine`: the brokers or Kubernetes, soon (a pod becoming Ready, a learner catching up, a
 *   membership change committing). The step waits in its activity: one worker slot, a look every
 *   poll interval and at every change of the cluster's objects.
 * - `person`: only a change of the QueenCluster, its spec or its annotations (an approval, the
 *   end of a pause, a decision about a failed version). The operation parks: its activity ends,
 *   the workflow waits for the watcher's signal that the QueenCluster or what it owns changed.
 *   No worker slot, no timer.
 * - `outside`: a person acting on something other than the QueenCluster (a Secret, a
 *   StorageClass, a node, an object someone else owns, a volume to replace), or time. It parks as
 *   `person` does, and also looks again on a durable timer.
 */
export type Lift = 'machine' | 'person' | 'outside';

export const LIFTED_BY: Record<GateName, Lift> = {
  'leader-known': 'machine',
  'apply-running': 'outside',
  'no-change-in-flight': 'machine',
  'pod-running': 'machine',
  // A voter behind that does not move: often a slow follower under load, which moves again by itself
  // (a wiped one is replaced by a person, whose annotation makes the operation yield).
  'voter-not-stalled': 'machine',
  'pod-ready': 'machine',
  'pod-ready-for-min-ready-seconds': 'machine',
  'voter-live': 'machine',
  'voter-caught-up': 'machine',
  'write-commits': 'machine',
  'not-paused': 'person',
  approved: 'person',
  'canary-soaked': 'machine',
  'new-version-healthy': 'person',
  'learner-caught-up': 'machine',
  'pod-gone': 'machine',
  'claim-exists': 'machine',
  'old-volume-gone': 'machine',
  'volume-grown': 'machine',
  'statefulset-deleted': 'machine',
  'statefulset-present': 'machine',
  'statefulset-recreated': 'machine',
  'worker-polling': 'machine',
  'step-succeeds': 'machine',
  'pod-out-of-endpoints': 'machine',
  'requests-drained': 'machine',
  'disruption-budget': 'machine',
  'objects-ours': 'outside',
  'replace-target': 'person',
  // A change the leader did not take now (busy, timeout, the leader changing): the machine's; one it
  // refuses for good is Blocked, and so outside.
  'membership-change': 'machine',
  'volume-can-grow': 'outside',
  'broker-credentials': 'outside',
  // A node that stops reporting mostly comes back by itself (a person's taint moves its pods).
  'node-down': 'machine',
  'version-can-boot': 'person',
  'pod-config': 'outside',
  'crash-loop': 'outside',
  'image-pull': 'outside',
  unschedulable: 'outside',
  forming: 'machine',
  'last-operation': 'person',
  // A restore's backup: a person names another, or the QueenBackup becomes ready.
  'backup-ready': 'outside',
  // A backup's waits (takeBackup, which runs beside the cluster's operations): the machine's.
  'no-operation-running': 'machine',
  'backup-source-caught-up': 'machine',
  'snapshot-ready': 'machine',
  // The cluster link: a standby following its source, a switchover's source out of reach and its
  // standby caught up (the machine's); a promotion held while the source still answers, and a
  // source's upgrade held until its standbys run the new version (a person's, on another QueenCluster).
  'standby-follows': 'machine',
  'source-stopped': 'outside',
  'source-fenced': 'machine',
  'standby-caught-up': 'machine',
  'standby-upgraded-first': 'outside',
};

/** Who lifts a hold: its gate's, and never the machine for one only a person can decide (Blocked). */
export function liftOf(gate: GateName | null | undefined, phase: string): Lift {
  const lift = gate ? LIFTED_BY[gate] : 'machine';
  return lift === 'machine' && phase === 'Blocked' ? 'outside' : lift;
}

/** A hold a wait step ends on rather than stay in its activity (activities/waits.ts): only a person, or something outside the QueenCluster, lifts it. */
export interface ParkedHold {
  gate: GateName | null;
  phase: string;
  message: string;
  lift: Exclude<Lift, 'machine'>;
  /** Looked at again by then at the latest (ms since the epoch): something the wait judges falls due (a new version's deadline). */
  lookAgainAt?: number;
}

/** What a wait step that parked returns in place of its result; the workflow waits, then runs it again (workflows/operation.ts). */
export interface Parked {
  parked: ParkedHold;
}

export const isParked = (r: unknown): r is Parked => typeof r === 'object' && r !== null && typeof (r as Partial<Parked>).parked === 'object';

/** The voters' node ids: the leader's view when there is one, and the ids the spec asks for. */
export function voterIds(obs: Observation): number[] {
  const ids = new Set<number>(obs.membership?.voters ?? []);
  for (let id = 1; id <= obs.voters; id++) ids.add(id);
  return [...ids].sort((a, b) => a - b);
}

/**
 * A pod whose image the node cannot pull (ErrImagePull, ImagePullBackOff), in one line with the
 * registry's cause when the kubelet gives it (not found, access denied); null otherwise.
 */
export function imagePullProblem(pod: PodObservation): string | null {
  const reason = pod.waitingReason;
  if (reason !== 'ErrImagePull' && reason !== 'ImagePullBackOff' && reason !== 'InvalidImageName' && reason !== 'ErrImageNeverPull') return null;
  const msg = pod.waitingMessage ?? '';
  const cause = /not ?found|manifest unknown/i.test(msg)
    ? 'not found'
    : /unauthorized|denied|forbidden|\b40[13]\b/i.test(msg)
      ? 'access denied'
      : /timeout|i\/o|connection/i.test(msg)
        ? 'the registry does not answer'
        : '';
  return `pod ${pod.ordinal} cannot pull its image ${pod.image ?? ''} (${reason}${cause ? `: ${cause}` : ''})`.replace('image  (', 'image (');
}

/**
 * A pod on a node that does not report (its kubelet is silent: the machine is off or cut off) or
 * reports NotReady: the node named, since when, and what a person can do. A pod there neither
 * stops nor starts until the node is back; Kubernetes' out-of-service taint says it is off for
 * good, so its pods are deleted and their volumes detached, and the pod starts on another node.
 */
/** A pod no scheduler has placed, in the words of status. */
export function notPlacedProblem(pod: PodObservation): string | null {
  return pod.notPlaced ? `pod ${pod.ordinal} is not scheduled: ${pod.notPlaced}` : null;
}

export function nodeDownProblem(pod: PodObservation | undefined): string | null {
  const d = pod?.nodeDown;
  if (!pod || !d) return null;
  const since = d.since === null ? '' : ` since ${new Date(d.since).toISOString().slice(11, 19)} UTC`;
  const how =
    d.ready === 'Unknown'
      ? `has not reported${since} (it is off or cut off from the API server)`
      : `is NotReady${since}${d.message ? ` (${d.message})` : ''}`;
  return (
    `pod ${pod.ordinal} is on node ${d.node}, which ${how}: this waits for the node to come back; ` +
    `if it is shut down for good, kubectl taint nodes ${d.node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute lets pod ${pod.ordinal} start on another node`
  );
}

/**
 * Why a change through the leader may not commit (it answers busy, or gives no answer): a voter
 * other than `except` on a node that does not report, named with what a person can do. Null when
 * no voter's node is down.
 */
export function voterNodeDownProblem(obs: Observation, except: number | null): string | null {
  for (const id of obs.membership?.voters ?? []) {
    if (id === except) continue;
    const down = nodeDownProblem(podAt(obs, id - 1));
    if (down) return down;
  }
  return null;
}

const otherVoters = (c: GateContext) => voterIds(c.obs).filter((id) => c.target === null || id !== c.target + 1);
/** The other voters whose pods have to be Ready: all but those a fix-forward waives (plan/fix-forward.ts). */
const readyChecked = (c: GateContext) => {
  const waived = fixForward(c.obs, c.target, c.removing)?.waived ?? [];
  return otherVoters(c).filter((id) => !waived.includes(id - 1));
};

type Gate = {
  name: GateName;
  /** The reason it holds, or null; with another gate's name (one of `as`) when that one says better who lifts it. */
  check: (c: GateContext) => string | { gate: GateName; reason: string } | null;
  as?: readonly GateName[];
  /** When a gate that holds opens by time alone (a minimum Ready time running out). */
  liftsAt?: (c: GateContext) => number | undefined;
};

/** How long a voter's pod has been Ready, in ms; null when it is not, or its Ready time is unknown. */
function readyFor(c: GateContext, id: number): number | null {
  const since = podAt(c.obs, id - 1)?.readySince;
  // A Ready time in the future (clock skew) counts as just now, never as a negative wait.
  return since === null || since === undefined ? null : Math.max(0, c.obs.at - since);
}

const POD_PROBLEM_GATES: readonly GateName[] = ['node-down', 'image-pull', 'unschedulable'];

/**
 * What keeps a voter's pod from running or being Ready that the machine will not end soon, under
 * the gate that names it: its node down, and (`starting`: the pod is not stopping) an image it
 * cannot pull or no scheduler placing it. Null for anything else.
 */
function podProblem(pod: PodObservation | undefined, starting: boolean): { gate: GateName; reason: string } | null {
  const down = nodeDownProblem(pod);
  if (down) return { gate: 'node-down', reason: down };
  if (!pod || !starting) return null;
  const pull = imagePullProblem(pod);
  if (pull) return { gate: 'image-pull', reason: pull };
  const placed = notPlacedProblem(pod);
  return placed ? { gate: 'unschedulable', reason: placed } : null;
}

/** The gates a pure observation can decide, in the order they are checked. */
export const STOP_GATES: readonly Gate[] = [
  {
    name: 'leader-known',
    check: ({ obs }) =>
      obs.membership && obs.membership.leader !== null
        ? null
        : !obs.membership && obs.brokerAuth
          ? obs.brokerAuth
          : 'no pod answers with a leader\'s view of the membership: an election is under way, or the cluster lost its majority',
  },
  {
    // Without its StatefulSet a stopped pod never comes back: the cluster has to be formed again first.
    name: 'statefulset-present',
    check: ({ obs }) =>
      !obs.statefulSet || obs.statefulSet.terminating ? `the StatefulSet ${obs.name} is gone: the cluster has to be formed again` : null,
  },
  {
    name: 'apply-running',
    check: ({ obs }) => {
      for (const p of obs.pods) {
        if (obs.health[p.ordinal]?.applyFailure) return `apply stopped on pod ${p.ordinal}: this needs a person, see the recovery guide`;
      }
      return null;
    },
  },
  {
    name: 'no-change-in-flight',
    check: ({ obs }) => (obs.membership?.changeInFlight || obs.membership?.joint ? 'a membership change is in flight' : null),
  },
  {
    name: 'pod-running',
    as: POD_PROBLEM_GATES,
    check: (c) => {
      for (const id of otherVoters(c)) {
        const pod = podAt(c.obs, id - 1);
        if (!pod || pod.terminating || !pod.running) return podProblem(pod, !pod?.terminating) ?? `pod ${id - 1} is not running`;
      }
      return null;
    },
  },
  {
    // Every voter, the target too: restarting a voter that does not catch up repairs nothing,
    // and stopping another one would leave the cluster on the last voters that work. Said
    // before "not Ready": a stale voter's pod often is not, and this says what to do about it.
    name: 'voter-not-stalled',
    check: (c) => {
      for (const id of voterIds(c.obs)) {
        if (c.removing && c.target !== null && id === c.target + 1) continue;
        if (isStalled(c.obs, c.memory, id, c.opts.stallAfterMs)) {
          const m = memberOf(c.obs.membership, id);
          return `node ${id} is behind the leader and does not catch up${lagText(m?.lag)}: if its volume was wiped or put back from a copy, it has to be replaced`;
        }
      }
      return null;
    },
  },
  {
    name: 'pod-ready',
    as: POD_PROBLEM_GATES,
    check: (c) => {
      for (const id of readyChecked(c)) {
        const pod = podAt(c.obs, id - 1);
        if (pod && !pod.ready) return podProblem(pod, true) ?? `pod ${id - 1} is not Ready`;
      }
      return null;
    },
  },
  {
    name: 'pod-ready-for-min-ready-seconds',
    check: (c) => {
      if (c.opts.minReadyMs <= 0) return null;
      for (const id of readyChecked(c)) {
        if ((readyFor(c, id) ?? 0) < c.opts.minReadyMs) return `pod ${id - 1} has been Ready for less than ${goDuration(c.opts.minReadyMs)}`;
      }
      return null;
    },
    // Once the last of them has been Ready that long; none if one has no Ready time to count from.
    liftsAt: (c) => {
      let at = c.obs.at;
      for (const id of readyChecked(c)) {
        const ms = readyFor(c, id);
        if (ms === null) return undefined;
        at = Math.max(at, c.obs.at + c.opts.minReadyMs - ms);
      }
      return at;
    },
  },
  {
    name: 'voter-live',
    as: ['node-down'],
    check: (c) => {
      for (const id of otherVoters(c)) {
        const m = memberOf(c.obs.membership, id);
        if (!m || !m.live) return podProblem(podAt(c.obs, id - 1), false) ?? `the leader has not heard from node ${id}`;
      }
      return null;
    },
  },
  {
    name: 'voter-caught-up',
    check: (c) => {
      for (const id of otherVoters(c)) {
        const m = memberOf(c.obs.membership, id);
        if (m && (m.lag === null || m.lag > c.opts.caughtUpEntries)) return `node ${id} is behind the leader${lagText(m.lag)}`;
      }
      return null;
    },
  },
];

/**
 * Whether the target's drain may begin now, before the gate opens: the only gate that holds the
 * stop is the minimum Ready time of the other voters, and it has less than `leadMs` left (every
 * gate would pass were it `leadMs` shorter). A drain takes a pod out of the client Services and
 * lets its requests finish; it stops nothing, so it can run while the last seconds of that wait
 * run, and the restart follows the gate at once instead of a drain later.
 */
export function drainAhead(c: GateContext, leadMs: number): boolean {
  if (stopGate(c)?.gate !== 'pod-ready-for-min-ready-seconds') return false;
  return stopGate({ ...c, opts: { ...c.opts, minReadyMs: Math.max(0, c.opts.minReadyMs - leadMs) } }) === null;
}

/**
 * The last gate of a stop, after the pure ones: a write probe through a pod that stays has to
 * commit. A grow (`growing`) lets writes refused at every disk gate (507 storage_full) through: a
 * full disk is not a lost quorum, and growing the volume is what opens the gate again.
 */
export function writeGate(probe: { ok: boolean; error?: string; storageFull?: boolean }, growing = false): GateHold | null {
  return probe.ok || (growing && probe.storageFull) ? null : { gate: 'write-commits', reason: `a write does not commit: ${probe.error}` };
}

/** The first gate that holds a stop of `target` back, or null when the pure gates pass. */
export function stopGate(c: GateContext): GateHold | null {
  for (const gate of STOP_GATES) {
    const held = gate.check(c);
    if (typeof held === 'string') return { gate: gate.name, reason: held, liftsAt: gate.liftsAt?.(c) };
    if (held) return held;
  }
  return null;
}
