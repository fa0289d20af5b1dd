// A plan before anything runs: the operation the spec would start now and its steps in order, in
// the words their Events and status lines use, with the named gates each step waits on. It is
// computed by the rules the operations run (neededOperation, nextRestart, nextVoterStep,
// nextVolumeStep) applied to the cluster as observed, then to the cluster as each step would leave
// it, so a plan and the run that follows it say the same steps. Nothing is changed for it.
import { replaceRequest } from '../crd/annotations.ts';
import type { StoredSpec } from '../crd/schema.ts';
import { neededOperation, type ClusterView, type Need, type OperationType } from './decide.ts';
import { raiseNote, runningVersion, versionDoor, versionRefusedText } from './door.ts';
import { fixForward, fixForwardText } from './fix-forward.ts';
import { goDuration, parseQuantity } from './format.ts';
import { STOP_GATES, type GateName } from './gates.ts';
import { claimAt, memberOf, podAt, type Observation } from './observation.ts';
import { nextRestart } from './restarts.ts';
import { nextVoterStep } from './voters.ts';
import { nextVolumeStep } from './volumes.ts';
import { restoring } from './backup.ts';
import { PROMOTE_STEPS, SWITCHOVER_STEPS } from './link-steps.ts';

export interface PlannedStep {
  step: string;
  gates: GateName[];
  note?: string;
}

export interface Plan {
  operation: OperationType | null;
  target: string;
  steps: PlannedStep[];
  /** One line: what would happen. */
  message: string;
}

export interface PlanInput {
  view: ClusterView;
  obs: Observation;
  spec: StoredSpec;
  /** The image the pods would run (<image>:<version>, or as pinned). */
  image: string;
}

/** The gates every stop of a pod waits on: not paused, the stop gate, a write through a pod that stays. */
export const STOP_GATE_NAMES: readonly GateName[] = ['not-paused', ...new Set(STOP_GATES.flatMap((g) => [g.name, ...(g.as ?? [])])), 'write-commits'];

/**
 * The gates a voter's removal waits on (activities/membership.ts removalHold, leaveAfterDrain): the
 * stop gate with its pod as the target, then its pod drained out of the client Services.
 */
export const REMOVAL_GATE_NAMES: readonly GateName[] = [...STOP_GATE_NAMES, 'pod-out-of-endpoints', 'requests-drained'];

/** Steps a simulation takes at most (a plan is a handful of steps; this only guards against a loop). */
const MAX_STEPS = 40;

export function planOperation(input: PlanInput): Plan {
  const need = neededOperation(input.view);
  if (!need) return { operation: null, target: '', steps: [], message: 'the cluster is as specified: no operation would start' };
  const steps = stepsOf(need, input);
  return { operation: need.type, target: need.target, steps, message: `${need.type} (${need.target}): ${steps.length === 0 ? 'no step' : steps.map((s) => s.step).join(', ')}` };
}

function stepsOf(need: Need, input: PlanInput): PlannedStep[] {
  switch (need.type) {
    case 'FormCluster':
      return formSteps(input);
    case 'RollingUpgrade':
      return upgradeSteps(input);
    case 'ScaleVoters':
      return voterSteps(input);
    case 'ReplaceNode':
      return replaceSteps(input);
    case 'GrowVolumes':
      return volumeSteps(input);
    case 'PromoteStandby':
      return PROMOTE_STEPS;
    case 'Switchover':
      return SWITCHOVER_STEPS;
  }
}

function formSteps({ view, obs, spec }: PlanInput): PlannedStep[] {
  if (restoring(view.qc)) return restoreSteps(spec);
  const pods = obs.statefulSet?.replicas ?? spec.replicas;
  return [
    { step: `create or apply the Services, the disruption budget and the StatefulSet (${pods} pods)`, gates: [] },
    { step: 'wait for the pods to start and elect a leader', gates: ['leader-known'] },
    { step: 'wait for every voter to be live and Ready', gates: ['no-change-in-flight', 'voter-live', 'pod-ready'] },
    { step: 'wait for a write to commit', gates: ['write-commits'] },
  ];
}

/** A cluster formed from a backup (workflows/restore-cluster.ts): pod 0 alone and recovered, then the other voters. */
function restoreSteps(spec: StoredSpec): PlannedStep[] {
  const from = spec.bootstrap?.fromBackup;
  const what = from?.name ? `the backup ${from.name}` : `the VolumeSnapshot ${from?.volumeSnapshot ?? ''}`;
  return [
    { step: `check that ${what} is ready to restore from`, gates: ['backup-ready'] },
    { step: `create the claim of pod 0 from ${what}`, gates: [] },
    { step: 'create the Services, the disruption budget and the StatefulSet with pod 0 alone, QUEEN_RAFT_FORCE_RECOVER=1', gates: [] },
    { step: 'wait for node 1 to recover alone and lead', gates: ['leader-known'] },
    { step: 'restart pod 0 without QUEEN_RAFT_FORCE_RECOVER', gates: ['pod-ready'] },
    { step: 'wait for every voter to be live and Ready', gates: ['no-change-in-flight', 'voter-live', 'pod-ready'] },
    { step: 'wait for a write to commit', gates: ['write-commits'] },
    ...(spec.replicas > 1
      ? [{ step: `then changing the voters to ${spec.replicas}: the other nodes added as learners and promoted together`, note: 'ScaleVoters, once this operation ends', gates: [] }]
      : []),
  ];
}

/** The pods restart one at a time in the order nextRestart gives, each left on the new template, Ready. */
function upgradeSteps({ view, obs, spec, image }: PlanInput): PlannedStep[] {
  // A version whose build cannot start on the cluster's catalogue version is refused before any pod stops.
  const door = versionDoor(view.qc.status, obs, spec.version);
  if (door) return [{ step: versionRefusedText(door, obs, runningVersion(view.qc.status)), gates: ['version-can-boot'], note: 'Blocked: it waits for a person' }];
  const sim = structuredClone(obs);
  sim.wantedHash = view.wantedTemplateHash;
  const steps: PlannedStep[] = [];
  if (sim.statefulSet?.templateHash !== sim.wantedHash) {
    steps.push({ step: `the pod template now runs ${image}; pods restart one at a time`, gates: [] });
  }
  if (sim.statefulSet) sim.statefulSet.templateHash = sim.wantedHash;
  for (let i = 0; i < MAX_STEPS; i++) {
    const pick = nextRestart(sim);
    if (!pick) break;
    const first = !sim.pods.some((p) => !p.terminating && p.hash === sim.wantedHash);
    const gates: GateName[] = [...STOP_GATE_NAMES];
    if (pick.why === 'leader' && spec.upgrade.approval === 'Manual') gates.push('approved');
    const leads = sim.membership?.leader === pick.ordinal + 1;
    const note =
      pick.why === 'leader'
        ? 'the leader, last'
        : pick.why === 'not-ready'
          ? leads
            ? 'not Ready on the old template, and the leader: after the other pods that are not Ready'
            : 'not Ready on the old template: it goes first'
          : undefined;
    // A pod that stops although others are not Ready (a fix-forward) says why, as its Event does.
    const forward = fixForward(sim, pick.ordinal);
    steps.push({ step: `restarting pod ${pick.ordinal}${forward ? ` ${fixForwardText(forward)}` : ''}`, gates, ...(note ? { note } : {}) });
    const pod = podAt(sim, pick.ordinal)!;
    Object.assign(pod, { hash: sim.wantedHash, uid: `${pod.uid}'`, running: true, ready: true });
    if (first && spec.upgrade.canarySeconds > 0) {
      steps.push({ step: `soaking pod ${pick.ordinal} on ${spec.version} for ${goDuration(spec.upgrade.canarySeconds * 1000)}`, gates: ['canary-soaked'] });
    }
  }
  if (steps.length === 0) steps.push({ step: 'applying the spec to the Services, the disruption budget and the StatefulSet; no pod restarts', gates: [] });
  // After the last pod: the leader raises the catalogue version (or does not: finalize Manual).
  const raise = raiseNote(view.qc, obs);
  const last = steps.at(-1)!;
  if (raise) last.note = last.note ? `${last.note}; ${raise}` : raise;
  return steps;
}

/** The gates each voter step waits on before it acts (see activities/membership.ts and scale.ts). */
const VOTER_GATES: Record<string, GateName[]> = {
  'scale-pods': [],
  'add-learner': ['leader-known', 'no-change-in-flight', 'pod-running'],
  promote: ['learner-caught-up', 'no-change-in-flight'],
  'hand-off': [...STOP_GATE_NAMES],
  // Through the stop gate, its pod drained first: out of the client Services, then the requests in flight finish.
  'remove-member': [...REMOVAL_GATE_NAMES],
  // The pod that held a removed node's data is drained before it goes with its claim.
  'wipe-claim': ['pod-out-of-endpoints', 'requests-drained'],
  'delete-claim': ['pod-gone'],
};

/** nextVoterStep, again and again, on the cluster as each step leaves it. */
function voterSteps({ obs, spec }: PlanInput): PlannedStep[] {
  const sim = structuredClone(obs);
  const steps: PlannedStep[] = [];
  for (let i = 0; i < MAX_STEPS; i++) {
    const s = nextVoterStep(sim, spec.replicas);
    if (s.kind === 'done') break;
    if (s.kind === 'wait') {
      // What the cluster shows now holds the first step back; the rest depends on how it clears.
      steps.push({ step: s.message, gates: [s.gate as GateName], note: 'it waits for this first; the steps after depend on how it clears' });
      break;
    }
    steps.push({ step: s.message, gates: [...(VOTER_GATES[s.kind] ?? [])] });
    const m = sim.membership!;
    switch (s.kind) {
      case 'scale-pods': {
        sim.statefulSet = { ...sim.statefulSet!, replicas: s.pods };
        sim.pods = sim.pods.filter((p) => p.ordinal < s.pods);
        for (let o = 0; o < s.pods; o++) {
          if (podAt(sim, o)) continue;
          sim.pods.push({ ...structuredClone(sim.pods[0]!), ordinal: o, name: `${sim.name}-${o}`, uid: `planned-${o}`, running: true, ready: false, hash: sim.wantedHash });
          // A new pod starts on an empty volume: it has applied nothing yet.
          sim.health[o] = { ...structuredClone(Object.values(sim.health)[0]!), role: 'learner', applied: 0, commit: 0 };
          if (!claimAt(sim, o)) sim.claims.push({ ...structuredClone(sim.claims[0]!), ordinal: o, name: `data-${sim.name}-${o}`, uid: `planned-claim-${o}` });
        }
        break;
      }
      case 'add-learner':
        m.members.push({ nodeId: s.nodeId, voter: false, raft: null, http: null, matched: 0, lag: 0, lastAckMs: 0, live: true });
        m.learners = [...m.learners, s.nodeId];
        break;
      case 'promote':
        for (const id of s.nodeIds) {
          memberOf(m, id)!.voter = true;
          // A promoted node's pod passes its readiness probe (the change ends once it does).
          const pod = podAt(sim, id - 1);
          if (pod) pod.ready = true;
        }
        m.voters = [...m.voters, ...s.nodeIds].sort((a, b) => a - b);
        m.learners = m.learners.filter((id) => !s.nodeIds.includes(id));
        break;
      case 'hand-off':
        // Leadership goes to another voter that stays.
        m.leader = m.voters.find((id) => id !== s.nodeId && id <= spec.replicas) ?? m.voters.find((id) => id !== s.nodeId) ?? null;
        break;
      case 'remove-member':
        m.members = m.members.filter((x) => x.nodeId !== s.nodeId);
        m.voters = m.voters.filter((id) => id !== s.nodeId);
        m.learners = m.learners.filter((id) => id !== s.nodeId);
        break;
      case 'delete-claim':
        sim.claims = sim.claims.filter((c) => c.uid !== s.claimUid);
        break;
    }
  }
  return steps;
}

/** The replacement's order (workflows/replace-node.ts), a hand-off first when the node leads. */
function replaceSteps({ view, obs }: PlanInput): PlannedStep[] {
  const r = replaceRequest(view.qc, obs.statefulSet?.replicas ?? null);
  if (!r || !('ordinal' in r)) return [];
  const { ordinal: o, nodeId: id } = r;
  const steps: PlannedStep[] = [{ step: `replacing pod ${o}`, gates: ['leader-known', 'claim-exists'] }];
  if (obs.membership?.leader === id) {
    steps.push({ step: `pod ${o} leads: stopping it once so it hands leadership away before it is removed`, gates: [...STOP_GATE_NAMES], note: 'it leads' });
  }
  steps.push(
    { step: `removing node ${id} from the membership`, gates: [...REMOVAL_GATE_NAMES] },
    { step: `deleting the volume of pod ${o}`, gates: ['old-volume-gone'] },
    { step: `adding node ${id} as a learner`, gates: ['pod-running', 'leader-known', 'no-change-in-flight'] },
    { step: `promoting node ${id} to voters`, gates: ['learner-caught-up', 'no-change-in-flight'] },
    { step: `pod ${o} is a voter again`, gates: ['pod-ready'] },
  );
  return steps;
}

/** nextVolumeStep on the cluster as each step leaves it (a volume that grows, grows online). */
function volumeSteps({ obs, spec }: PlanInput): PlannedStep[] {
  const sim = structuredClone(obs);
  const size = spec.storage.size;
  const sizeBytes = parseQuantity(size);
  let templateBytes = sim.statefulSet?.claimTemplateSize ? parseQuantity(sim.statefulSet.claimTemplateSize) : sizeBytes;
  const steps: PlannedStep[] = [];
  for (let i = 0; i < MAX_STEPS; i++) {
    const s = nextVolumeStep(sim, size, sizeBytes, templateBytes);
    if (s.kind === 'done') break;
    if (s.kind === 'wait') {
      // The volume grows: here it is taken as grown (a file system that waits for its pod restarts, through the stop gate).
      const c = sim.claims.find((x) => x.capacityBytes > 0 && x.capacityBytes < sizeBytes && !x.terminating);
      if (!c) break;
      c.capacityBytes = sizeBytes;
      continue;
    }
    if (s.kind === 'expand-claims' || s.kind === 'expand') {
      steps.push({ step: s.message, gates: [], note: 'a file system that needs its pod restarted for it gets that restart, through the stop gate' });
      const uids = s.kind === 'expand' ? [s.claimUid] : s.claims.map((c) => c.claimUid);
      for (const c of sim.claims.filter((x) => uids.includes(x.uid))) {
        c.requestBytes = sizeBytes;
        c.request = size;
      }
    } else if (s.kind === 'restart') {
      steps.push({ step: s.message, gates: [...STOP_GATE_NAMES] });
      const c = claimAt(sim, s.ordinal)!;
      Object.assign(c, { capacityBytes: sizeBytes, resizePending: false });
    } else {
      steps.push({ step: s.message, gates: ['statefulset-deleted'] });
      templateBytes = sizeBytes;
    }
  }
  return steps;
}
