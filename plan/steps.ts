// The steps of the operations as they run and as a plan shows them: each step's line (the words
// of its Event and of the Temporal UI), the named gates it may wait on, in the order they are
// looked at, and the conditions that add a gate (an approval before the leader, a soak after the
// first pod, a hold on a failed new version). The workflows and the activities take their lines
// and conditions from here, and the plan preview (plan/preview.ts) lists the same steps with the
// same gates, so a plan and the run that follows it say the same thing. The e2e scenario `plan`
// compares the gates that held each step of a run (the `held` of its result) with its plan's.
//
// A step's gates are the gates of the parts the step runs, in order. Each part's gates are defined
// once, here, beside the part that holds with them: the waits of the pure rules (nextVoterStep,
// nextVolumeStep) are collected as they are checked, and the parts with side effects (a write
// probe, a drain, an eviction, a change through the leader) name their gates below, which those
// parts hold with (activities/gate.ts, drain.ts, membership.ts).
import type { StoredSpec } from '../crd/schema.ts';
import { fixForward, withFixForward } from './fix-forward.ts';
import { goDuration, idsText } from './format.ts';
import { STOP_GATES, type GateName } from './gates.ts';
import type { Observation } from './observation.ts';
import type { RestartPick } from './restarts.ts';
import type { VoterStep } from './voters.ts';
import type { VolumeStep } from './volumes.ts';

export interface PlannedStep {
  step: string;
  gates: GateName[];
  note?: string;
}

// ---- the parts and their gates ---------------------------------------------------------------

/**
 * A pod's stop, and a voter's removal (activities/gate.ts stopHold): not paused, the pure stop
 * gate (plan/gates.ts STOP_GATES, in its order, each with the names it may hold as), then a write
 * through a pod that stays.
 */
export const STOP_GATE_NAMES: readonly GateName[] = ['not-paused', ...new Set(STOP_GATES.flatMap((g) => [g.name, ...(g.as ?? [])])), 'write-commits'];

/** A pod drained before it stops or its node leaves (activities/drain.ts drainPods). */
export const DRAIN_GATES = ['pod-out-of-endpoints', 'requests-drained'] as const satisfies readonly GateName[];
export type DrainGate = (typeof DRAIN_GATES)[number];

/**
 * A pod stopped once it is drained (activities/gate.ts restartPod): the Eviction API while the
 * disruption budget allows none, then the pod gone (it waits for a node that does not report).
 */
export const EVICTION_GATES = ['disruption-budget', 'pod-gone'] as const satisfies readonly GateName[];
export type EvictionGate = (typeof EVICTION_GATES)[number];

/**
 * A membership change sent to the leader (activities/membership.ts changeThroughLeader): a leader
 * that answers, and its answer (a change it holds: another in flight, busy, no quorum).
 */
export const CHANGE_GATES = ['leader-known', 'membership-change'] as const satisfies readonly GateName[];
export type ChangeGate = (typeof CHANGE_GATES)[number];

/** A node leaving the membership (activities/membership.ts leaveAfterDrain): its pod drained, no other change in flight, the change. */
export const LEAVE_GATES: readonly GateName[] = ['leader-known', 'no-change-in-flight', ...DRAIN_GATES, ...CHANGE_GATES];

/** A stop of a pod through the stop gate: the wait for the gate (a drain may run ahead in its last seconds), then the restart. */
export const RESTART_GATES: readonly GateName[] = [...STOP_GATE_NAMES, ...DRAIN_GATES, ...EVICTION_GATES];

/** The gates in their first order, each once. */
export function gatesOf(...parts: readonly (readonly GateName[])[]): GateName[] {
  return [...new Set(parts.flat())];
}

// ---- RollingUpgrade --------------------------------------------------------------------------

/** The Event of the template applied: the image it runs (UpdateTemplate). */
export const templateLine = (image: string) => `the pod template now runs ${image}; pods restart one at a time`;

/** The Event of a finalize (queenmq.com/finalize): the same image, without the setting that held the cluster version. */
export const finalizeLine = (version: string) =>
  `finalizing ${version}: a rolling restart, one pod at a time, the leader last, without QUEEN_RAFT_CLUSTER_VERSION_MS=0; the leader then raises the cluster's catalogue version`;

/** A version whose build cannot start on the cluster's catalogue version (plan/door.ts): refused before any pod stops, until a person changes it. */
export const DOOR_GATE = 'version-can-boot' satisfies GateName;
export const doorStep = (refused: string): PlannedStep => ({ step: refused, gates: [DOOR_GATE], note: 'Blocked: it waits for a person' });

/** With spec.upgrade.approval Manual, the leader's restart waits for a person (gate `approved`). */
export function needsApproval(spec: Pick<StoredSpec, 'upgrade'>, pick: Pick<RestartPick, 'why'>): boolean {
  return pick.why === 'leader' && spec.upgrade.approval === 'Manual';
}

/** No pod runs the new template yet: the next restart is the first, the one a canary soaks. */
export const firstOnNewTemplate = (obs: Observation) => !obs.pods.some((p) => !p.terminating && p.hash === obs.wantedHash);

/** How long the pod restarted next soaks before the next moves: canarySeconds for the first pod on the new template, else none. */
export function canarySecondsAfter(obs: Observation, spec: Pick<StoredSpec, 'upgrade'>): number {
  return firstOnNewTemplate(obs) ? spec.upgrade.canarySeconds : 0;
}

/**
 * A failed new version holds the upgrade (spec.upgrade.onFailure Hold, gate new-version-healthy)
 * once a pod runs it; with Rollback it ends the forward steps instead.
 */
const failureHolds = (spec: Pick<StoredSpec, 'upgrade'>, onNew: boolean) => (onNew && spec.upgrade.onFailure === 'Hold' ? (['new-version-healthy'] as GateName[]) : []);

/**
 * The restart of the pod `pick` on the cluster `obs` as it stands before it: the wait for it (the
 * new version judged, the approval, the stop gate, its drain in the gate's last seconds), then its
 * stop (drained, evicted, gone), and after the last one the wait for the cluster to settle (the
 * stop gate again). A stop a fix-forward lets through says why, as its Event does.
 */
export function restartStep(spec: Pick<StoredSpec, 'upgrade'>, pick: RestartPick, obs: Observation): PlannedStep {
  const leads = obs.membership?.leader === pick.ordinal + 1;
  const note =
    pick.why === 'leader'
      ? 'the leader, last'
      : pick.why === 'not-ready'
        ? leads
          ? 'not Ready on the old template, and the leader: after the other pods that are not Ready'
          : 'not Ready on the old template: it goes first'
        : undefined;
  const gates = gatesOf(failureHolds(spec, !firstOnNewTemplate(obs)), needsApproval(spec, pick) ? ['approved'] : [], RESTART_GATES);
  return { step: withFixForward(restartLine(pick.ordinal), fixForward(obs, pick.ordinal)), gates, ...(note ? { note } : {}) };
}

export const restartLine = (ordinal: number) => `restarting pod ${ordinal}`;

/** The soak of the first pod on the new version (spec.upgrade.canarySeconds), watched (activities/upgrade.ts awaitCanary). */
export function canaryStep(spec: Pick<StoredSpec, 'upgrade'>, ordinal: number, version: string, seconds: number): PlannedStep {
  return { step: canaryLine(ordinal, version, seconds), gates: gatesOf(['canary-soaked'], failureHolds(spec, true)) };
}

export const canaryLine = (ordinal: number, version: string, seconds: number) => `soaking pod ${ordinal} on ${version} for ${goDuration(seconds * 1000)}`;

// ---- ScaleVoters -----------------------------------------------------------------------------

/** A voter step that acts. */
export type VoterAction = Exclude<VoterStep, { kind: 'wait' } | { kind: 'done' }>;

/**
 * A voter step: the waits nextVoterStep checked to choose it (`checked`), the removal gate where a
 * voter leaves (awaitVoterStep), then what the step runs (activities/scale.ts, membership.ts).
 */
export function voterStep(s: VoterAction, checked: readonly GateName[]): PlannedStep {
  return { step: s.message, gates: gatesOf(checked, voterStepGates(s)) };
}

function voterStepGates(s: VoterAction): readonly GateName[] {
  switch (s.kind) {
    case 'scale-pods':
    case 'delete-claim':
    case 'delete-claims':
      return [];
    case 'add-learner':
      return CHANGE_GATES;
    case 'promote':
      // After it, the operation ends once the new voters' pods are Ready (nextVoterStep's last wait).
      return gatesOf(['leader-known', 'learner-caught-up', 'no-change-in-flight'], CHANGE_GATES, ['pod-ready']);
    case 'hand-off':
      return RESTART_GATES;
    case 'remove-member':
      return gatesOf(STOP_GATE_NAMES, LEAVE_GATES);
    case 'wipe-claim':
    case 'wipe-claims':
      return DRAIN_GATES;
  }
}

// ---- ReplaceNode -----------------------------------------------------------------------------

/** The lines of a replacement, in its order (workflows/replace-node.ts, activities/replace.ts). */
export const replaceLines = (ordinal: number, nodeId: number) => ({
  begin: `replacing pod ${ordinal}`,
  handOff: `pod ${ordinal} leads: stopping it once so it hands leadership away before it is removed`,
  leave: `removing node ${nodeId} from the membership`,
  wipe: `deleting the volume of pod ${ordinal}`,
  learner: `adding node ${nodeId} as a learner`,
  promote: `promoting ${idsText([nodeId])} to voters`,
  done: `pod ${ordinal} is a voter again`,
});

/** The replacement of pod `ordinal` (node `nodeId`), its hand-off first when the node leads. */
export function replaceSteps(ordinal: number, nodeId: number, leads: boolean): PlannedStep[] {
  const line = replaceLines(ordinal, nodeId);
  return [
    // The request checked (a voter's pod, not the only voter) and its claim recorded.
    { step: line.begin, gates: ['replace-target', 'leader-known', 'claim-exists'] },
    ...(leads ? [{ step: line.handOff, gates: gatesOf(RESTART_GATES), note: 'it leads' }] : []),
    // Out through the removal gate (its own stall excepted), its pod drained first.
    { step: line.leave, gates: gatesOf(STOP_GATE_NAMES, LEAVE_GATES) },
    // The claim deleted, and the pod on it (drained first while it is in the client Services).
    { step: line.wipe, gates: gatesOf(['old-volume-gone'], DRAIN_GATES) },
    // Its pod running on an empty volume, then the change.
    { step: line.learner, gates: gatesOf(['statefulset-present', 'pod-running'], CHANGE_GATES) },
    { step: line.promote, gates: gatesOf(['leader-known', 'learner-caught-up', 'no-change-in-flight'], CHANGE_GATES) },
    { step: line.done, gates: ['pod-ready'] },
  ];
}

// ---- FormCluster -----------------------------------------------------------------------------

/** The lines of a formation (workflows/form-cluster.ts, activities/form.ts). */
export const FORM_LINES = {
  objects: 'apply the Services, the disruption budget and the StatefulSet',
  leader: 'wait for the pods to start and elect a leader',
  voters: 'wait for every voter to be live and Ready',
  write: 'wait for a write to commit',
} as const;

/** What holds a formation: objects of another's, a StatefulSet still being deleted; the pods (a Blocked pod's reason); the voters; a write. */
export function formSteps(pods: number): PlannedStep[] {
  return [
    { step: `${FORM_LINES.objects} (${pods} pods)`, gates: ['objects-ours', 'statefulset-deleted'] },
    { step: FORM_LINES.leader, gates: ['leader-known', 'pod-config', 'apply-running', 'broker-credentials'] },
    { step: FORM_LINES.voters, gates: ['leader-known', 'no-change-in-flight', 'voter-live', 'pod-ready'] },
    { step: FORM_LINES.write, gates: ['write-commits'] },
  ];
}

/** The lines of a formation from a backup (workflows/restore-cluster.ts, activities/restore.ts); `what` names the backup or snapshot. */
export const restoreLines = (what: string) => ({
  source: 'check that the backup is ready to restore from',
  claim: `create the claim of pod 0 from ${what}`,
  objects: 'create the Services, the disruption budget and the StatefulSet with pod 0 alone, QUEEN_RAFT_FORCE_RECOVER=1',
  leader: 'wait for node 1 to recover alone and lead',
  recovered: 'restart pod 0 without QUEEN_RAFT_FORCE_RECOVER',
});

/** A cluster formed from a backup: pod 0 alone and recovered, then the other voters (a ScaleVoters once it ends). */
export function restoreSteps(spec: Pick<StoredSpec, 'replicas' | 'bootstrap'>): PlannedStep[] {
  const from = spec.bootstrap?.fromBackup;
  const line = restoreLines(from?.name ? `the backup ${from.name}` : `the VolumeSnapshot ${from?.volumeSnapshot ?? ''}`);
  const [objects, leader, voters, write] = formSteps(1);
  return [
    { step: line.source, gates: ['backup-ready'] },
    { step: line.claim, gates: [] },
    { step: line.objects, gates: objects!.gates },
    { step: line.leader, gates: leader!.gates },
    { step: line.recovered, gates: ['pod-ready'] },
    voters!,
    write!,
    ...(spec.replicas > 1
      ? [{ step: `then changing the voters to ${spec.replicas}: the other nodes added as learners and promoted together`, note: 'ScaleVoters, once this operation ends', gates: [] }]
      : []),
  ];
}

// ---- GrowVolumes -----------------------------------------------------------------------------

/** A volume step: the waits nextVolumeStep checked to choose it, then what the step runs (activities/grow.ts, gate.ts). */
export function volumeStep(s: Exclude<VolumeStep, { kind: 'wait' } | { kind: 'done' }>, checked: readonly GateName[]): PlannedStep {
  switch (s.kind) {
    case 'expand-claims':
    case 'expand':
      return { step: s.message, gates: gatesOf(checked, ['volume-can-grow']), note: 'a file system that needs its pod restarted for it gets that restart, through the stop gate' };
    case 'restart':
      return { step: s.message, gates: gatesOf(checked, RESTART_GATES) };
    case 'recreate':
      return { step: s.message, gates: gatesOf(checked, ['statefulset-recreated']) };
  }
}
