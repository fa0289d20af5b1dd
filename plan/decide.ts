// Which operation a cluster needs now. Level-triggered: a pure function of the QueenCluster and of
// what the API server shows of its objects, evaluated on every event and on a resync, so nothing
// depends on seeing a particular event. One operation at a time, in this priority: form the
// cluster; promote a standby (annotation); replace a node (annotation); change the voters; switch
// over to a standby (annotation); grow the volumes; roll pods whose template is out of date.
import { readAnnotations, replaceRequest } from '../crd/annotations.ts';
import { ANNOTATIONS, type Phase, type QueenCluster } from '../crd/schema.ts';
import { parseQuantity } from './format.ts';
import { linkNeed, linkRefusal, standbyBehind } from './link.ts';
import type { ClaimObservation, PodObservation, StatefulSetObservation } from './observation.ts';

export const OPERATION_TYPES = ['FormCluster', 'PromoteStandby', 'ReplaceNode', 'ScaleVoters', 'Switchover', 'GrowVolumes', 'RollingUpgrade'] as const;
export type OperationType = (typeof OPERATION_TYPES)[number];

/** The phase each operation shows while it runs and nothing holds it. */
export const OPERATION_PHASE: Record<OperationType, Phase> = {
  FormCluster: 'Forming',
  PromoteStandby: 'Promoting',
  ReplaceNode: 'Replacing',
  ScaleVoters: 'Scaling',
  Switchover: 'SwitchingOver',
  GrowVolumes: 'Resizing',
  RollingUpgrade: 'Upgrading',
};

/** Lower is more urgent. */
export const priority = (t: OperationType) => OPERATION_TYPES.indexOf(t);

export interface ClusterView {
  qc: QueenCluster;
  /** Hashes of what the spec renders now (activities/resources.ts). */
  wantedSpecHash: string;
  wantedTemplateHash: string;
  statefulSet: StatefulSetObservation | null;
  /** The client and headless Services exist. */
  servicesPresent: boolean;
  pods: PodObservation[];
  claims: ClaimObservation[];
}

export interface Need {
  type: OperationType;
  /** What the operation works towards; the same need with the same fingerprint is the same request. */
  fingerprint: string;
  /** One line for people: what is wanted. */
  target: string;
}

/**
 * The generation that status.observedGeneration may say now: the object's once its spec is rolled
 * out (no pod behind, no operation needed), none before (it keeps the last rolled-out one), so that
 * tools that read kstatus (Argo CD, Flux) see a spec change in progress until it is done.
 */
export function rolledOutGeneration(v: ClusterView): number | undefined {
  return neededOperation(v) === null ? v.qc.metadata.generation : undefined;
}

/** The most urgent operation the cluster needs, or null when it is as specified. */
export function neededOperation(v: ClusterView): Need | null {
  const { qc } = v;
  const spec = qc.spec;
  const status = qc.status ?? {};
  const formed = (status.voters?.length ?? 0) > 0;
  const sts = v.statefulSet;
  // A source a switchover fenced is the switchover's (it runs on its standby): nothing starts here.
  if (status.fence) return null;
  if (!formed || !sts || sts.terminating || !v.servicesPresent) {
    return { type: 'FormCluster', fingerprint: `form:${v.wantedSpecHash}`, target: `${spec.replicas ?? 3} voters on ${spec.version}` };
  }
  // A promotion or a switchover of a standby (annotations; plan/link.ts).
  const link = linkNeed(qc);
  if (link) return link;
  // A replacement that cannot be done is no need: decide() shows it as refused.
  const replace = replaceRequest(qc, sts.replicas);
  if (replace && 'ordinal' in replace) return { type: 'ReplaceNode', fingerprint: `replace:${replace.pod}`, target: replace.pod };
  const voters = spec.replicas ?? 3;
  // The voters the leader last showed, and pods for them: a StatefulSet scaled by hand is repaired (G5).
  if ((status.voters?.length ?? voters) !== voters || sts.replicas !== voters) {
    return { type: 'ScaleVoters', fingerprint: `voters:${voters}`, target: `${voters} ${voters === 1 ? 'voter' : 'voters'}` };
  }
  const size = spec.storage?.size ?? '50Gi';
  const sizeBytes = parseQuantity(size);
  const claimsBehind = v.claims.some((c) => !c.terminating && c.requestBytes > 0 && c.requestBytes < sizeBytes);
  const templateBehind = sts.claimTemplateSize !== null && parseQuantity(sts.claimTemplateSize) < sizeBytes;
  if (claimsBehind || templateBehind) return { type: 'GrowVolumes', fingerprint: `size:${size}`, target: `volumes of ${size}` };
  const podsBehind = v.pods.some((p) => !p.terminating && p.hash !== v.wantedTemplateHash);
  if (sts.specHash !== v.wantedSpecHash || podsBehind) {
    return { type: 'RollingUpgrade', fingerprint: `spec:${v.wantedSpecHash}`, target: spec.version };
  }
  return null;
}

export interface RunningOperation {
  type: OperationType;
  workflowId: string;
  runId?: string;
}

export type Decision =
  | { action: 'none'; why: string }
  | { action: 'start'; need: Need; retryToken: string }
  | { action: 'yield'; running: RunningOperation; need: Need }
  | { action: 'cancel'; running: RunningOperation }
  /** A need that waits for the pause or the plan-only annotation; `message` says which, in status words. */
  | { action: 'paused'; need: Need; message: string }
  /** A request that cannot be done (a replacement of no voter's pod): Blocked with the reason, nothing new starts. */
  | { action: 'refused'; message: string }
  | { action: 'stopped'; need: Need; message: string };

/** The ends after which the same request is not started again by itself. */
export const STOPPED_RESULTS: readonly string[] = ['Cancelled', 'Failed', 'RolledBack', 'Terminated'];

/** How long a succeeded operation's request is not started again, whatever a stale cache says. */
export const SUCCEEDED_GRACE_MS = 30_000;

export function decide(v: ClusterView, running: RunningOperation | null, now: number): Decision {
  const asked = readAnnotations(v.qc.metadata.annotations);
  if (running && asked.cancel) return { action: 'cancel', running };
  const need = neededOperation(v);
  if (running) {
    // plan-only starts nothing: not even the more urgent operation a yield would make way for.
    if (need && priority(need.type) < priority(running.type) && !asked.planOnly && !recreatingItself(v, running, need)) return { action: 'yield', running, need };
    return { action: 'none', why: `${running.type} runs` };
  }
  // Forming the cluster comes first; a link request that cannot be done holds everything after it.
  const refusedLink = linkRefusal(v.qc) ?? (need?.type === 'RollingUpgrade' ? standbyBehind(v.qc) : null);
  if (refusedLink && (!need || priority(need.type) > priority('FormCluster'))) return { action: 'refused', message: refusedLink };
  // Anything after a replacement waits for the refused one to be fixed.
  const replace = v.statefulSet ? replaceRequest(v.qc, v.statefulSet.replicas) : null;
  if (replace && 'refused' in replace && (!need || priority(need.type) > priority('ReplaceNode'))) return { action: 'refused', message: replace.refused };
  if (!need) return { action: 'none', why: 'the cluster is as specified' };
  if (asked.pause) return { action: 'paused', need, message: `paused by the ${ANNOTATIONS.pause} annotation: ${need.type} (${need.target}) waits` };
  if (asked.planOnly) {
    return { action: 'paused', need, message: `plan only (${ANNOTATIONS.planOnly}): ${need.type} (${need.target}) would start; its steps are in status.plan` };
  }
  const retryToken = asked.retry;
  const last = v.qc.status?.lastOperation;
  if (last && last.type === need.type && last.fingerprint === need.fingerprint) {
    // Not again for the same request: a cancel, a failure, a rollback (until the spec changes or a retry asks).
    if (STOPPED_RESULTS.includes(last.result) && (last.retryToken ?? '') === retryToken) {
      return { action: 'stopped', need, message: last.message ?? `${need.type} ${last.result.toLowerCase()}` };
    }
    const finished = last.finishedAt ? Date.parse(last.finishedAt) : NaN;
    if (last.result === 'Succeeded' && Number.isFinite(finished) && now - finished < SUCCEEDED_GRACE_MS) {
      return { action: 'none', why: `${need.type} for the same request succeeded a moment ago` };
    }
  }
  return { action: 'start', need, retryToken };
}

/**
 * A grow deletes its StatefulSet and creates it again (status.operation.gate says so meanwhile):
 * while it does, the missing StatefulSet is its own doing, not a cluster to form again.
 */
function recreatingItself(v: ClusterView, running: RunningOperation, need: Need): boolean {
  const op = v.qc.status?.operation;
  return need.type === 'FormCluster' && running.type === 'GrowVolumes' && op?.type === 'GrowVolumes' && op.gate === 'statefulset-recreated';
}
