// What every step does whatever it is: it heartbeats while it runs (a long call included), a
// refusal of the API server that no retry can fix ends it (Blocked with the API server's words),
// and a step that keeps failing says so in status.message and in an Event, with the step it is.
import { activityInfo } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure, CompleteAsyncError } from '@temporalio/common';
import { apiErrorMessage, apiServerReady, describeKubeError, getCluster, patchClusterStatus, statusCode } from './kube.ts';
import { keepAlive, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { Parking } from './waits.ts';
import { idsText, podsText } from '../plan/format.ts';
import { wipeLine, type VolumeToWipe } from '../plan/voters.ts';
import { stepFailures } from '../metrics.ts';

/**
 * Answers of the API server that a retry of the same request cannot change: a bad request, a
 * refusal (RBAC, an admission policy or webhook), an invalid object, one too large. Conflicts
 * (409), throttling (429), a missing object (404: the next look says what is gone), an expired
 * credential (401) and every 5xx may pass on the next try.
 */
export const REFUSED_CODES = new Set([400, 403, 405, 413, 415, 422]);

/**
 * The bookkeeping of an operation (its status at the beginning and the end) and the observer are
 * retried whatever the answer: ending them would only leave the status untold, and an operation
 * that cannot record its beginning would be started again and again.
 */
const ALWAYS_RETRIED = new Set(['beginOperation', 'endOperation', 'observeClusterStatus']);

/** A step's failures are told (status.message, an Event) from this attempt on. */
export const TELL_FROM_ATTEMPT = 3;

type Step = (...args: never[]) => Promise<unknown>;
const ref = (args: unknown[]) => args[0] as ClusterRef | undefined;
const arg = <T>(args: unknown[], i: number) => args[i] as T;

/** Each step in the words of the step list, from its arguments. */
const WORDS: Record<string, (args: unknown[]) => string> = {
  beginOperation: (a) => `beginning ${arg<{ type: string }>(a, 1)?.type ?? 'the operation'}`,
  endOperation: (a) => `recording how ${arg<{ type: string }>(a, 1)?.type ?? 'the operation'} ended`,
  sayYieldPending: (a) => `saying that it yields to ${arg<{ yieldTo: string }>(a, 1)?.yieldTo ?? 'a more urgent operation'} after this step`,
  applyClusterObjects: () => 'applying the Services, the disruption budget and the StatefulSet',
  awaitLeader: () => 'waiting for the pods to start and elect a leader',
  awaitVoters: () => 'waiting for every voter to be live and Ready',
  confirmWrite: () => 'waiting for a write to commit',
  awaitStopGate: (a) => `waiting until pod ${arg<number>(a, 1)} may stop`,
  restartPod: (a) => arg<{ message?: string }>(a, 2)?.message ?? `restarting pod ${arg<{ ordinal: number }>(a, 1)?.ordinal}`,
  addLearnerNode: (a) => `adding node ${arg<number>(a, 1)} as a learner`,
  promoteNodes: (a) => `promoting ${idsText(arg<number[]>(a, 1) ?? [])} to voters`,
  removeNode: (a) => `removing node ${arg<number>(a, 1)} from the membership`,
  applyPodTemplate: () => 'applying the new pod template',
  awaitNextRestart: () => 'waiting until the next pod may stop',
  awaitSettled: () => 'waiting for the cluster to settle',
  awaitCanary: (a) => `soaking pod ${arg<{ ordinal: number }>(a, 1)?.ordinal} on the new version`,
  awaitFailureDecision: (a) => `waiting for a person's decision about ${arg<{ failedVersion: string }>(a, 1)?.failedVersion ?? 'the new version'}`,
  describeVersions: () => 'reading which pods run which version',
  checkReplacement: (a) => `checking the request to replace ${arg<string>(a, 1)}`,
  leaveMembership: (a) => `removing node ${arg<{ nodeId: number }>(a, 1)?.nodeId} from the membership`,
  wipeVolume: (a) => `deleting the volume of pod ${arg<{ ordinal: number }>(a, 1)?.ordinal}`,
  awaitEmptyNode: (a) => `waiting for pod ${arg<{ ordinal: number }>(a, 1)?.ordinal} to start empty`,
  finishReplacement: (a) => `making pod ${arg<{ ordinal: number }>(a, 1)?.ordinal} a voter again`,
  awaitVoterStep: () => 'waiting for the next step towards the voters wanted',
  scalePods: (a) => arg<string>(a, 2),
  deleteClaim: (a) => arg<string>(a, 3),
  deleteClaims: (a) => {
    const claims = arg<{ ordinal: number }[]>(a, 1) ?? [];
    return claims.length === 1 ? `deleting the volume claim of pod ${claims[0]!.ordinal}` : `deleting the volume claims of ${podsText(claims.map((c) => c.ordinal))}`;
  },
  wipeClaim: (a) => arg<{ message: string }>(a, 1)?.message,
  wipeClaims: (a) => {
    const volumes = arg<VolumeToWipe[]>(a, 1);
    return volumes?.length ? wipeLine(volumes) : 'deleting the volumes of nodes that left the membership';
  },
  awaitVolumeStep: () => 'waiting for the next step towards the volume size wanted',
  expandClaim: (a) => arg<string>(a, 5),
  expandClaims: (a) => arg<string>(a, 3),
  deleteStatefulSetOrphan: (a) => arg<string>(a, 1),
  createStatefulSet: (a) => `creating the StatefulSet again with ${arg<number>(a, 1)} pods`,
  recreateStatefulSet: (a) => arg<string>(a, 1),
  observeClusterStatus: () => 'observing the cluster',
  beginBackup: () => 'creating the QueenBackup',
  snapshotVolume: (a) => `taking a snapshot of the volume of pod ${arg<{ ordinal: number }>(a, 2)?.ordinal}`,
  pruneBackups: () => 'deleting the backups past spec.backup.keep',
  resolveRestoreSource: () => 'checking the backup to form the cluster from',
  createRestoreClaim: (a) => `creating the claim of pod 0 from the VolumeSnapshot ${arg<{ volumeSnapshot: string }>(a, 1)?.volumeSnapshot}`,
  finishForceRecovery: () => 'restarting pod 0 without QUEEN_RAFT_FORCE_RECOVER',
};

/** The step's line for an activity and its arguments. */
export function stepWords(type: string, args: unknown[]): string {
  try {
    return WORDS[type]?.(args) || type;
  } catch {
    return type;
  }
}

/** An error in one line: the API server's answer, or the error's own first line. */
function errorWords(err: unknown): string {
  if (statusCode(err) !== null) return `the API server ${describeKubeError(err).replace(/^it /, '')}`;
  const first = (err instanceof Error ? err.message : String(err)).split('\n')[0]!;
  return first.length > 300 ? `${first.slice(0, 300)}...` : first;
}

/**
 * Whether a refusal of the API server is its settled word. A 403 is not, from an API server that
 * has just started and has not read its roles and bindings yet (a soak restarted it and an upgrade
 * failed on "forbidden"): it is a refusal from the second attempt on, while /readyz says ready.
 */
export async function refusalStands(code: number, attempt: () => number, ready: () => Promise<boolean>): Promise<boolean> {
  if (code !== 403) return true;
  return attempt() >= 2 && (await ready());
}

/** What a failed attempt becomes: a refusal no retry can fix ends the step, anything else is retried (and told). */
export async function stepFailure(deps: ActivityDeps, type: string, args: unknown[], err: unknown): Promise<unknown> {
  if (err instanceof ApplicationFailure || err instanceof CancelledFailure || err instanceof CompleteAsyncError) return err;
  const words = stepWords(type, args);
  const code = statusCode(err);
  if (code !== null && REFUSED_CODES.has(code) && !ALWAYS_RETRIED.has(type) && (await refusalStands(code, () => activityInfo().attempt, () => apiServerReady(deps.kube.kc)))) {
    // Its message is the whole story (the operation's status shows the innermost message).
    return ApplicationFailure.nonRetryable(`${words}: the API server refused it (${code}): ${apiErrorMessage(err)}`, 'Refused');
  }
  const info = activityInfo();
  const target = ref(args);
  if (info.workflowType !== 'clusterObserver' && target?.namespace) stepFailures.inc({ namespace: target.namespace, name: target.name, step: type });
  // (A backup's step says nothing in the cluster's status: the cluster's phase is not the backup's.)
  if (info.attempt >= TELL_FROM_ATTEMPT && info.workflowType !== 'clusterObserver' && info.workflowType !== 'takeBackup' && target?.namespace) {
    await tellFailing(deps, target, words, info.attempt, errorWords(err)).catch((e) =>
      deps.log.warn({ namespace: target.namespace, name: target.name, err: String(e) }, 'could not say in status that a step keeps failing'),
    );
  }
  return retried(words, err);
}

/**
 * A failed attempt that is retried. An answer of the API server becomes one line, the step's words
 * and the answer: the client's own message carries the response headers, and the attempt's
 * failure is what the Web UI shows and, when the retries run out, what status says.
 */
export function retried(words: string, err: unknown): unknown {
  const code = statusCode(err);
  return code === null ? err : ApplicationFailure.retryable(`${words}: ${errorWords(err)}`, `ApiServer${code}`);
}

/** status.message (and status.operation.step) say the step and its last error; an Event now and then. */
async function tellFailing(deps: ActivityDeps, target: ClusterRef, words: string, attempt: number, error: string): Promise<void> {
  const qc = await getCluster(deps.kube, target.namespace, target.name);
  if (!qc || qc.metadata.uid !== target.uid) return;
  const message = `${words}: attempt ${attempt} failed: ${error}; trying again`;
  deps.log.warn({ namespace: target.namespace, name: target.name, step: words, attempt, error }, message);
  await patchClusterStatus(deps.kube, target.namespace, target.name, {
    message,
    ...(qc.status?.operation ? { operation: { step: words } } : {}),
  });
  if (attempt === TELL_FROM_ATTEMPT || attempt % 10 === 0) await stepEvent(deps, qc, 'StepFailing', message, 'Warning', true);
}

/**
 * Every activity of `steps`, kept alive by heartbeats, its failures classified and told. A wait
 * that parks (waits.ts) ends its step with `{ parked }` in place of the step's result: the
 * workflow's wait steps (workflows/operation.ts) take that, wait, and run the step again.
 */
export function guarded<T extends Record<string, Step>>(deps: ActivityDeps, steps: T): T {
  const out: Record<string, Step> = {};
  for (const [type, fn] of Object.entries(steps)) {
    out[type] = (...args: never[]) =>
      keepAlive(async () => {
        try {
          return await fn(...args);
        } catch (err) {
          if (err instanceof Parking) return { parked: err.parked };
          throw await stepFailure(deps, type, args, err);
        }
      });
  }
  return out as T;
}
