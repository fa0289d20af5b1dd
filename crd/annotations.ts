// The annotations a person sets on a QueenCluster, read in one place: every part of the operator
// (the watcher's decision, the stop gate, the observer, the steps) reads them through
// readAnnotations, so a value means the same everywhere. A value an annotation does not take, and
// an annotation of ours that does not exist, act as unset; the observer says so once in a Warning
// Event that names the annotation and the values it takes. The README's table of annotations is
// rendered from USER_ANNOTATIONS.
import { ANNOTATIONS, GROUP, type QueenCluster } from './schema.ts';
import { nodeIdOf, parseOrdinal } from './ordinals.ts';

export interface AnnotationDoc {
  annotation: string;
  /** The values it takes, in words. */
  values: string;
  /** What it does. */
  effect: string;
}

/** The annotations a person sets, with their values and effect: the README's table. */
export const USER_ANNOTATIONS: readonly AnnotationDoc[] = [
  {
    annotation: ANNOTATIONS.replacePod,
    values: "the name of a voter's pod, such as `queen-1`",
    effect:
      'replaces the node of that pod with an empty volume (out of the membership, a new volume, back as a learner, promoted); ' +
      'removed by the operator at the end. Removing it before the node left the membership calls the replacement off. ' +
      'A pod that is not a voter\'s, or the only voter, is refused with `Blocked` and the reason, and interrupts nothing',
  },
  {
    annotation: ANNOTATIONS.cancel,
    values: '`true` or `false`',
    effect:
      '`true` cancels the running operation at its next safe point (removed by the operator when it ends); with nothing ' +
      'running it is removed at once, with an Event that says so. `false` does nothing',
  },
  {
    annotation: ANNOTATIONS.retry,
    values: 'any value it has not seen, such as `$(date +%s)`',
    effect: 'starts again an operation that was cancelled or failed, for the same spec',
  },
  {
    annotation: ANNOTATIONS.approve,
    values: 'the version an upgrade goes to, such as `2.6.1`',
    effect:
      'with `spec.upgrade.approval: Manual`, lets the upgrade to that version restart the leader (it waits before the ' +
      'leader until then); another version does nothing, and a new version needs a new approval. Removed by the operator once that ' +
      'upgrade is over (done, or rolled back): the next upgrade, even to the same version, asks again',
  },
  {
    annotation: ANNOTATIONS.finalize,
    values: 'the version the pods run, such as `2.7.0`',
    effect:
      'with `spec.upgrade.finalize: Manual`, closes the way back: the pods restart once, one at a time through the stop gate ' +
      '(a rolling restart, the leader last), without `QUEEN_RAFT_CLUSTER_VERSION_MS=0`, and the leader then raises the cluster ' +
      'to the catalogue version that build reads; versions whose builds read less can no longer start. Another version does ' +
      'nothing; the next upgrade needs a finalize of its own',
  },
  {
    annotation: ANNOTATIONS.plan,
    values: '`true` or `false`',
    effect:
      '`true` writes `status.plan`: the operation the spec would start now and its steps in order, with the gates each ' +
      'waits on, kept up to date while it is set; it changes nothing, and starts or holds nothing. `false`, or removing ' +
      'it (and `plan-only`), removes `status.plan`',
  },
  {
    annotation: ANNOTATIONS.planOnly,
    values: '`true` or `false`',
    effect:
      '`true` writes `status.plan` as `plan` does and starts no operation while it is set (an operation already running ' +
      'goes on: add `pause` to hold it too), so a spec change can be read as a plan before it runs; `false`, or removing ' +
      'it, lets the planned operation start',
  },
  {
    annotation: ANNOTATIONS.backup,
    values: 'any value it has not seen, such as `$(date +%s)`',
    effect:
      'takes a backup now: a QueenBackup, a VolumeSnapshot of a caught-up voter\'s volume (see `docs/backups.md`); ' +
      'removed by the operator once the QueenBackup exists. Past `spec.backup.keep` only scheduled backups are deleted, never these',
  },
  {
    annotation: ANNOTATIONS.promote,
    values: '`true` or `force`',
    effect:
      'on a standby: promotes it to an ordinary cluster after the loss of its source (the Event says what it may have lost). `true` is ' +
      'refused with `Blocked` while the source still answers the standby (two clusters would take writes): stop the source, or ask for ' +
      'a switchover; `force` promotes anyway. Removed by the operator once promoted',
  },
  {
    annotation: ANNOTATIONS.switchover,
    values: '`true`',
    effect:
      'on a standby whose source is a QueenCluster of this Kubernetes cluster: a planned switch that loses nothing. The source stops ' +
      'taking writes, the standby catches up with it and is promoted, and the old source becomes a standby of the new primary (its ' +
      'volumes start again from a seed of it). Removed by the operator at the end',
  },
  {
    annotation: ANNOTATIONS.pause,
    values: '`true` or `false`',
    effect:
      '`true` holds the next disruptive step of a running operation (its gate `not-paused`), starts nothing new and pauses the ' +
      'backup Schedule; `false`, or removing it, goes on',
  },
];

export interface AnnotationProblem {
  annotation: string;
  value: string;
  /** One line for the Warning Event: the annotation, the values it takes, and that it acts as unset. */
  message: string;
}

/** What the annotations ask for, with the values read. */
export interface UserRequests {
  /** The pod named by replace-pod (not yet checked against the cluster: see replaceRequest). */
  replacePod: string | null;
  /** The retry token: '' when unset. */
  retry: string;
  cancel: boolean;
  pause: boolean;
  /** The version approved for the leader's restart (spec.upgrade.approval: Manual), or null. */
  approve: string | null;
  /** The version a person finalized (spec.upgrade.finalize: Manual), or null. */
  finalize: string | null;
  /** status.plan is written (plan or plan-only). */
  plan: boolean;
  /** No operation starts: its plan is written instead. */
  planOnly: boolean;
  /** A backup asked for now (queenmq.com/backup): its value, '' when unset. */
  backup: string;
  /** A standby's promotion: `true`, or `force` (even while its source still answers); null when not asked. */
  promote: 'true' | 'force' | null;
  /** A planned switchover to this standby. */
  switchover: boolean;
  /** Annotations of ours whose value (or name) is not one the operator takes: they act as unset. */
  problems: AnnotationProblem[];
}

const BOOLEAN: Record<string, boolean> = { true: true, false: false };
const KNOWN = new Set(USER_ANNOTATIONS.map((a) => a.annotation));

function flag(annotations: Record<string, string>, key: string, unset: string, problems: AnnotationProblem[]): boolean {
  const value = annotations[key];
  if (value === undefined) return false;
  if (Object.hasOwn(BOOLEAN, value)) return BOOLEAN[value]!;
  problems.push({ annotation: key, value, message: `${key}="${value}" is not a value it takes (true or false): it is read as unset, ${unset}` });
  return false;
}

export function readAnnotations(annotations: Record<string, string> | undefined): UserRequests {
  const a = annotations ?? {};
  const problems: AnnotationProblem[] = [];
  const cancel = flag(a, ANNOTATIONS.cancel, 'nothing is cancelled', problems);
  const pause = flag(a, ANNOTATIONS.pause, 'nothing is paused', problems);
  const planOnly = flag(a, ANNOTATIONS.planOnly, 'operations start as they are needed', problems);
  const plan = flag(a, ANNOTATIONS.plan, 'no plan is written', problems) || planOnly;
  const switchover = flag(a, ANNOTATIONS.switchover, 'no switchover is asked for', problems);
  let promote: UserRequests['promote'] = null;
  const promoteValue = a[ANNOTATIONS.promote];
  if (promoteValue === 'true' || promoteValue === 'force') promote = promoteValue;
  else if (promoteValue !== undefined && promoteValue !== 'false') {
    problems.push({
      annotation: ANNOTATIONS.promote,
      value: promoteValue,
      message: `${ANNOTATIONS.promote}="${promoteValue}" is not a value it takes (true or force): it is read as unset, nothing is promoted`,
    });
  }
  let replacePod: string | null = a[ANNOTATIONS.replacePod] ?? null;
  if (replacePod === '') {
    problems.push({
      annotation: ANNOTATIONS.replacePod,
      value: '',
      message: `${ANNOTATIONS.replacePod} is empty: it takes the name of a voter's pod, such as queen-1; it is read as unset`,
    });
    replacePod = null;
  }
  for (const [key, value] of Object.entries(a)) {
    if (!key.startsWith(`${GROUP}/`) || KNOWN.has(key)) continue;
    problems.push({
      annotation: key,
      value,
      message: `${key} is not an annotation of this operator, which reads ${USER_ANNOTATIONS.map((d) => d.annotation).join(', ')}: it is ignored`,
    });
  }
  return {
    replacePod,
    retry: a[ANNOTATIONS.retry] ?? '',
    cancel,
    pause,
    approve: a[ANNOTATIONS.approve] || null,
    finalize: a[ANNOTATIONS.finalize] || null,
    plan,
    planOnly,
    backup: a[ANNOTATIONS.backup] ?? '',
    promote,
    switchover,
    problems,
  };
}

export type ReplaceRequest = { pod: string; ordinal: number; nodeId: number } | { pod: string; refused: string };

/**
 * The replacement the replace-pod annotation asks for, checked against the cluster: the pod of a
 * voter (an ordinal below spec.replicas, and below the StatefulSet's pods when it has fewer), and
 * not the only voter. Null when it asks for none.
 */
export function replaceRequest(
  qc: Pick<QueenCluster, 'metadata' | 'spec'> & { status?: { voters?: readonly number[] | null } | null },
  statefulSetPods: number | null,
  membershipVoters: readonly number[] | null = qc.status?.voters ?? null,
): ReplaceRequest | null {
  const pod = readAnnotations(qc.metadata.annotations).replacePod;
  if (pod === null) return null;
  const name = qc.metadata.name;
  const wanted = qc.spec.replicas ?? 3;
  const ordinal = parseOrdinal(name, pod);
  const pods = Math.min(wanted, statefulSetPods ?? wanted);
  // A voter is one the spec asks for (with a pod), or one the leader lists that has a pod: during a
  // scale-down the nodes above spec.replicas are voters until they leave, and may be replaced meanwhile.
  const listed = ordinal >= 0 && ordinal < (statefulSetPods ?? Infinity) && !!membershipVoters?.includes(nodeIdOf(ordinal));
  if (ordinal < 0 || (ordinal >= pods && !listed)) {
    const which = pods === 1 ? `${name}-0` : `a pod from ${name}-0 to ${name}-${pods - 1}`;
    return {
      pod,
      refused: `the pod asked to be replaced, "${pod}", is not a voter of this cluster: name ${which} in ${ANNOTATIONS.replacePod}, or remove it`,
    };
  }
  if ((membershipVoters && membershipVoters.length > 0 ? membershipVoters.length : wanted) <= 1) {
    return {
      pod,
      refused: `${pod} is the only voter: replacing it would lose every committed write; restore the cluster from a backup instead and remove the ${ANNOTATIONS.replacePod} annotation`,
    };
  }
  return { pod, ordinal, nodeId: nodeIdOf(ordinal) };
}

/** The annotation problems and a refused replacement, each as the Warning Event it gives. */
export function annotationWarnings(qc: Pick<QueenCluster, 'metadata' | 'spec'>, statefulSetPods: number | null): { key: string; reason: string; message: string }[] {
  const out = readAnnotations(qc.metadata.annotations).problems.map((p) => ({ key: `${p.annotation}=${p.value}`, reason: 'InvalidAnnotation', message: p.message }));
  const replace = replaceRequest(qc, statefulSetPods);
  if (replace && 'refused' in replace) out.push({ key: `${ANNOTATIONS.replacePod}=${replace.pod}:refused`, reason: 'ReplaceRefused', message: replace.refused });
  return out;
}
