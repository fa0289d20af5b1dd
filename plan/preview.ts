// A plan before anything runs: the operation the spec would start now and its steps in order, in
// the words their Events and status lines use, with the named gates each step waits on. It is
// computed by the rules the operations run (neededOperation, nextRestart, nextVoterStep,
// nextVolumeStep, and the steps' lines, conditions and gates of plan/steps.ts) applied to the
// cluster as observed, then to the cluster as each step would leave it, so a plan and the run that
// follows it say the same steps. Nothing is changed for it.
import { replaceRequest } from '../crd/annotations.ts';
import type { StoredSpec } from '../crd/schema.ts';
import { neededOperation, type ClusterView, type Need, type OperationType } from './decide.ts';
import { raiseNote, runningVersion, versionDoor, versionRefusedText } from './door.ts';
import { parseQuantity } from './format.ts';
import type { GateName } from './gates.ts';
import { claimAt, memberOf, podAt, type Observation } from './observation.ts';
import { nextRestart } from './restarts.ts';
import { canaryStep, canarySecondsAfter, doorStep, formSteps, replaceSteps, restartStep, restoreSteps, templateLine, voterStep, volumeStep, type PlannedStep } from './steps.ts';
import { handsOffBeforeLeaving, nextVoterStep } from './voters.ts';
import { nextVolumeStep } from './volumes.ts';
import { restoring } from './backup.ts';
import { PROMOTE_STEPS, SWITCHOVER_STEPS } from './link-steps.ts';

export type { PlannedStep };
export { STOP_GATE_NAMES } from './steps.ts';

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
      return restoring(input.view.qc) ? restoreSteps(input.spec) : formSteps(input.obs.statefulSet?.replicas ?? input.spec.replicas);
    case 'RollingUpgrade':
      return upgradeSteps(input);
    case 'ScaleVoters':
      return voterSteps(input);
    case 'ReplaceNode':
      return replacement(input);
    case 'GrowVolumes':
      return volumeSteps(input);
    case 'PromoteStandby':
      return PROMOTE_STEPS;
    case 'Switchover':
      return SWITCHOVER_STEPS;
  }
}

/** The pods restart one at a time in the order nextRestart gives, each left on the new template, Ready. */
function upgradeSteps({ view, obs, spec, image }: PlanInput): PlannedStep[] {
  // A version whose build cannot start on the cluster's catalogue version is refused before any pod stops.
  const door = versionDoor(view.qc.status, obs, spec.version);
  if (door) return [doorStep(versionRefusedText(door, obs, runningVersion(view.qc.status)))];
  const sim = structuredClone(obs);
  sim.wantedHash = view.wantedTemplateHash;
  const steps: PlannedStep[] = [];
  if (sim.statefulSet?.templateHash !== sim.wantedHash) steps.push({ step: templateLine(image), gates: [] });
  if (sim.statefulSet) sim.statefulSet.templateHash = sim.wantedHash;
  for (let i = 0; i < MAX_STEPS; i++) {
    const pick = nextRestart(sim);
    if (!pick) break;
    const canary = canarySecondsAfter(sim, spec);
    steps.push(restartStep(spec, pick, sim));
    const pod = podAt(sim, pick.ordinal)!;
    Object.assign(pod, { hash: sim.wantedHash, uid: `${pod.uid}'`, running: true, ready: true });
    if (canary > 0) steps.push(canaryStep(spec, pick.ordinal, spec.version, canary));
  }
  if (steps.length === 0) steps.push({ step: 'applying the spec to the Services, the disruption budget and the StatefulSet; no pod restarts', gates: [] });
  // After the last pod: the leader raises the catalogue version (or does not: finalize Manual).
  const raise = raiseNote(view.qc, obs);
  const last = steps.at(-1)!;
  if (raise) last.note = last.note ? `${last.note}; ${raise}` : raise;
  return steps;
}

/** nextVoterStep, again and again, on the cluster as each step leaves it. */
function voterSteps({ obs, spec }: PlanInput): PlannedStep[] {
  const sim = structuredClone(obs);
  const steps: PlannedStep[] = [];
  for (let i = 0; i < MAX_STEPS; i++) {
    const checked: GateName[] = [];
    const s = nextVoterStep(sim, spec.replicas, checked);
    if (s.kind === 'done') break;
    if (s.kind === 'wait') {
      // What the cluster shows now holds the first step back; the rest depends on how it clears.
      steps.push({ step: s.message, gates: [s.gate], note: 'it waits for this first; the steps after depend on how it clears' });
      break;
    }
    steps.push(voterStep(s, checked));
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
      case 'delete-claims':
        sim.claims = sim.claims.filter((c) => !s.claims.some((x) => x.claimUid === c.uid));
        break;
      case 'wipe-claim':
      case 'wipe-claims':
        // Each pod comes back on a new, empty claim.
        for (const v of s.kind === 'wipe-claims' ? s.volumes : [s]) {
          const claim = claimAt(sim, v.ordinal);
          if (claim) claim.uid = `planned-claim-${v.ordinal}`;
          const pod = podAt(sim, v.ordinal);
          if (pod) Object.assign(pod, { uid: `planned-${v.ordinal}`, ready: false });
          sim.health[v.ordinal] = { ...sim.health[v.ordinal]!, role: 'learner', applied: 0, commit: 0 };
        }
        break;
    }
  }
  return steps;
}

/** The replacement's order (workflows/replace-node.ts), a hand-off first when the node leads. */
function replacement({ view, obs }: PlanInput): PlannedStep[] {
  const r = replaceRequest(view.qc, obs.statefulSet?.replicas ?? null);
  if (!r || !('ordinal' in r)) return [];
  return replaceSteps(r.ordinal, r.nodeId, !!obs.membership && handsOffBeforeLeaving(obs.membership, r.nodeId));
}

/** nextVolumeStep on the cluster as each step leaves it (a volume that grows, grows online). */
function volumeSteps({ obs, spec }: PlanInput): PlannedStep[] {
  const sim = structuredClone(obs);
  const size = spec.storage.size;
  const sizeBytes = parseQuantity(size);
  let templateBytes = sim.statefulSet?.claimTemplateSize ? parseQuantity(sim.statefulSet.claimTemplateSize) : sizeBytes;
  const steps: PlannedStep[] = [];
  // The waits looked at since the last step: a volume's growth, taken as done here, holds the step after it.
  let checked: GateName[] = [];
  for (let i = 0; i < MAX_STEPS; i++) {
    const s = nextVolumeStep(sim, size, sizeBytes, templateBytes, [], checked);
    if (s.kind === 'done') break;
    if (s.kind === 'wait') {
      // The volume grows: here it is taken as grown (a file system that waits for its pod restarts, through the stop gate).
      const c = sim.claims.find((x) => x.capacityBytes > 0 && x.capacityBytes < sizeBytes && !x.terminating);
      if (!c) break;
      c.capacityBytes = sizeBytes;
      continue;
    }
    if (s.kind === 'expand-claims' || s.kind === 'expand') {
      steps.push(volumeStep(s, checked));
      checked = [];
      const uids = s.kind === 'expand' ? [s.claimUid] : s.claims.map((c) => c.claimUid);
      for (const c of sim.claims.filter((x) => uids.includes(x.uid))) {
        c.requestBytes = sizeBytes;
        c.request = size;
      }
    } else if (s.kind === 'restart') {
      steps.push(volumeStep(s, checked));
      checked = [];
      const c = claimAt(sim, s.ordinal)!;
      Object.assign(c, { capacityBytes: sizeBytes, resizePending: false });
    } else {
      steps.push(volumeStep(s, checked));
      checked = [];
      templateBytes = sizeBytes;
    }
  }
  return steps;
}
