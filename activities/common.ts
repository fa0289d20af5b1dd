// What every activity shares: loading the cluster it works on, writing the running operation's
// step into status and its Events, keeping a step alive with heartbeats, and the write probe.
// The waits live in waits.ts.
import { activityInfo, Context, sleep } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { AsyncCompletionClient } from '@temporalio/client';
import type { Logger } from 'pino';
import type { ClusterCache, OwnedObjects } from './cluster-cache.ts';
import { withDefaults } from '../crd/defaults.ts';
import type { Phase, QueenCluster } from '../crd/schema.ts';
import type { Observation } from '../plan/observation.ts';
import type { GateName } from '../plan/gates.ts';
import { probeWrite, type ProbeResult } from './broker.ts';
import { brokerCredentials, forgetCredentials } from './credentials.ts';
import { getCluster, patchClusterStatus, recordEvent, statusCode, type EventStep, type EventSubject, type Kube } from './kube.ts';
import { clusterConditions } from './status.ts';
import { readAnnotations } from '../crd/annotations.ts';
import { brokerBase, observe } from './observe.ts';
import type { Settings } from './settings.ts';
import { sourceName, standbyLinkUnread, standbyProbe } from '../plan/link.ts';

export interface ActivityDeps {
  kube: Kube;
  settings: Settings;
  log: Logger;
  /** Aborted when this operator process stops: a wait then hands its step to another replica. */
  stopping?: AbortSignal;
  /** The process's watches, which the observer reads a resting cluster from. */
  cache?: ClusterCache;
  /** Completes the observer's rounds, which run outside any activity slot (activities/observer.ts). */
  completions?: AsyncCompletionClient;
}


/** The details each running activity heartbeated last: a keep-alive beat sends them again. */
const lastDetails = new WeakMap<Context, unknown>();

/** Heartbeats with these details (what the step waits for, or the observer's state) and keeps them. */
export function beat(details: unknown): void {
  const ctx = Context.current();
  lastDetails.set(ctx, details);
  ctx.heartbeat(details);
}

/** How often an activity heartbeats while it runs, whatever it is doing (a long call included). */
export const KEEP_ALIVE_MS = 5000;

/**
 * Runs an activity's body while heartbeating every KEEP_ALIVE_MS with its last details, so a call
 * that takes longer than the heartbeat timeout (a membership change may take 40 s) never makes
 * Temporal start a second attempt beside the first, and a crashed replica's step, quick or not,
 * is retried as soon as its heartbeats stop.
 */
export async function keepAlive<T>(body: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const timer = setInterval(() => {
    try {
      // Before its own first beat, an attempt keeps what the one before it left (the observer resumes from it).
      ctx.heartbeat(lastDetails.has(ctx) ? lastDetails.get(ctx) : ctx.info.heartbeatDetails);
    } catch {
      // the activity ended meanwhile
    }
  }, KEEP_ALIVE_MS);
  try {
    return await body();
  } finally {
    clearInterval(timer);
  }
}


/** The QueenCluster an operation works on; the uid tells a re-created object of the same name apart. */
export interface ClusterRef {
  namespace: string;
  name: string;
  uid: string;
  /**
   * The workflow that runs this step waits for a person itself: a hold that only a person (or
   * something outside the QueenCluster) lifts ends the step `parked` (waits.ts). Absent where the
   * workflow was recorded before it could (it then waits in the step, as it always did).
   */
  parks?: boolean;
  /** This step runs again after it parked: once done, status no longer says it waits (waits.ts). */
  parkedBefore?: boolean;
}

export const clusterKey = (ref: Pick<ClusterRef, 'namespace' | 'name'>) => `${ref.namespace}/${ref.name}`;

/** The QueenCluster as it is now; a deleted or re-created one ends the operation. */
export async function loadCluster(deps: ActivityDeps, ref: ClusterRef): Promise<QueenCluster> {
  const qc = await getCluster(deps.kube, ref.namespace, ref.name);
  if (!qc || qc.metadata.uid !== ref.uid || qc.metadata.deletionTimestamp) {
    throw ApplicationFailure.nonRetryable(`the QueenCluster ${clusterKey(ref)} is gone`, 'ClusterGone');
  }
  return qc;
}

export function opLogger(deps: ActivityDeps, ref: ClusterRef): Logger {
  let workflowId: string | undefined;
  try {
    workflowId = activityInfo().workflowExecution?.workflowId;
  } catch {
    workflowId = undefined;
  }
  return deps.log.child({ namespace: ref.namespace, name: ref.name, ...(workflowId ? { workflowId } : {}) });
}

export interface StepStatus {
  phase: Phase;
  message: string;
  /** The named gate that holds the step back, if any. */
  gate?: GateName | null;
}

/**
 * A status line with the yield an operation owes once its step finishes (status.operation.yieldTo),
 * so that every write of the step keeps saying it.
 */
export function withYieldPending(message: string, yieldTo: string | null | undefined): string {
  if (!yieldTo) return message;
  const owed = `; then it yields to ${yieldTo} (the step that runs is not stopped in its middle)`;
  return message.endsWith(owed) ? message : `${message}${owed}`;
}

/**
 * Writes phase and message, with the Ready condition that goes with them (its transition time
 * moves only when it flips), and any other status fields given.
 */
export async function writePhase(deps: ActivityDeps, ref: ClusterRef, phase: Phase, message: string, extra: Record<string, unknown> = {}, read?: QueenCluster) {
  // The object as the step has just read it, or as the API server has it now.
  const qc = read ?? (await getCluster(deps.kube, ref.namespace, ref.name));
  // The operation as it will stand after this write: the one given, or the one in status.
  const given = extra.operation as { type?: string; step?: string | null; yieldTo?: string | null } | null | undefined;
  const current = given === null ? null : { ...(qc?.status?.operation ?? {}), ...(given ?? {}) };
  // A yield that waits for the running step to finish is said with every line of that step.
  if (current?.yieldTo) {
    message = withYieldPending(message, current.yieldTo);
    if (given?.step) extra = { ...extra, operation: { ...given, step: withYieldPending(given.step, current.yieldTo) } };
  }
  const operation = current && current.type ? { type: current.type, step: current.step ?? null } : null;
  await patchClusterStatus(deps.kube, ref.namespace, ref.name, {
    phase,
    message,
    conditions: clusterConditions(qc?.status?.conditions, {
      phase,
      message,
      operation,
      paused: readAnnotations(qc?.metadata.annotations).pause,
      generation: qc?.metadata.generation,
      now: new Date(),
    }),
    ...extra,
  });
}

/**
 * Mirrors the running step into status: phase, message, and operation.step / operation.gate. A step
 * that writes its line does not wait for a person (operation.parked goes).
 */
export async function writeStep(deps: ActivityDeps, ref: ClusterRef, step: StepStatus, read?: QueenCluster) {
  await writePhase(deps, ref, step.phase, step.message, { operation: { step: step.message, gate: step.gate ?? null, parked: null } }, read);
}

/**
 * The step of an operation that runs now (its run and activity), for its Events; none for the
 * observer, whose Events are the cluster's phase changes, nor outside an activity.
 */
function eventStep(): EventStep | undefined {
  try {
    const info = activityInfo();
    if (info.workflowType === 'clusterObserver') return undefined;
    const runId = info.workflowExecution?.runId;
    return runId ? { key: `${runId}/${info.activityId}`, retried: info.attempt > 1 } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Records a completed step as an Event on the QueenCluster, once per step whatever its attempts
 * (`perAttempt`: an Event about the attempt itself, such as a step that keeps failing).
 */
export async function stepEvent(deps: ActivityDeps, qc: EventSubject, reason: string, message: string, type: 'Normal' | 'Warning' = 'Normal', perAttempt = false) {
  let step = perAttempt ? undefined : eventStep();
  const giveUpAt = Date.now() + EVENT_RETRY_MS;
  for (let tries = 1; ; tries++) {
    try {
      await recordEvent(deps.kube, qc, reason, message, type, step);
      return;
    } catch (err) {
      // The API server away (restarted, overloaded): the step happened, and kubectl describe is
      // where a person looks for it, so it is recorded once the API server answers again. An
      // answer that refuses it (forbidden, invalid) will not change: it is logged.
      const code = statusCode(err);
      const transient = code === null || code === 429 || code >= 500;
      if (!transient || Date.now() >= giveUpAt || deps.stopping?.aborted) {
        deps.log.warn({ namespace: qc.metadata.namespace, name: qc.metadata.name, reason, err: String(err) }, 'could not record an Event');
        return;
      }
      // The create may have reached the API server before its answer was lost: look for it first.
      if (step) step = { ...step, retried: true };
      await sleep(Math.min(1000 * tries, 5000));
    }
  }
}

/** How long a step keeps trying to record its Event while the API server does not answer. */
const EVENT_RETRY_MS = 90_000;

/**
 * The QueenCluster `ref` and what it owns as the process's watches have them, or null when they
 * cannot say: not fresh, or the object there is not `ref` (deleted, re-created, being deleted).
 */
export function watchedCluster(deps: ActivityDeps, ref: ClusterRef): { cluster: QueenCluster; owned: OwnedObjects } | null {
  const snap = deps.cache?.snapshot(ref.namespace, ref.name);
  const qc = snap?.cluster;
  if (!snap || !qc || qc.metadata.uid !== ref.uid || qc.metadata.deletionTimestamp) return null;
  return { cluster: qc, owned: snap.owned };
}


/** Why the brokers refused the operator at the last look at each cluster (by uid). */
const authProblems = new Map<string, string>();

/** Why the brokers refused the operator's credentials at the last look at a cluster (by uid), if they did. */
export const brokerRefusal = (uid: string): string | undefined => authProblems.get(uid);

export async function observeCluster(deps: ActivityDeps, qc: QueenCluster, watched?: OwnedObjects): Promise<Observation> {
  const creds = await brokerCredentials(deps.kube, qc);
  const obs = await observe(deps.kube, deps.settings.brokerAccess, qc, Date.now, creds, watched);
  const key = qc.metadata.uid ?? clusterKey(qc.metadata);
  if (obs.brokerAuth) {
    authProblems.set(key, obs.brokerAuth);
    if (creds.token) forgetCredentials(qc); // a rotated token is read again
  } else authProblems.delete(key);
  return obs;
}

/** The token the cluster's brokers ask for on their system routes, if any (spec.adminTokenSecret). */
export async function brokerToken(deps: ActivityDeps, qc: QueenCluster): Promise<string | null> {
  return (await brokerCredentials(deps.kube, qc)).token;
}

/**
 * A write through a pod that stays: each running pod that answered /health, other than the one
 * about to stop, voters' Ready pods first; the first that commits proves the cluster commits.
 * With one pod only, it goes through that pod.
 */
export async function probeThrough(deps: ActivityDeps, qc: QueenCluster, obs: Observation, except: number | null, attempts = 2): Promise<ProbeResult & { via?: number }> {
  // A standby takes no client write: its replay of the source committing stands for the probe.
  if (obs.link?.role === 'standby') return { ...standbyProbe(obs, qc.spec, qc.metadata.namespace), via: obs.link.via };
  if (standbyLinkUnread(obs, qc.spec, qc.status)) return { ok: false, error: `the standby's leader has not said yet how it follows its source ${sourceName(qc.spec, qc.metadata.namespace)}` };
  const spec = withDefaults(qc.spec);
  const voters = new Set(obs.membership?.voters ?? []);
  let candidates = obs.pods.filter((p) => p.running && !p.terminating && obs.health[p.ordinal] && p.ordinal !== except);
  if (candidates.length === 0 && except !== null && obs.pods.length === 1) {
    candidates = obs.pods.filter((p) => p.running && !p.terminating && obs.health[p.ordinal]);
  }
  candidates.sort((a, b) => Number(voters.has(b.ordinal + 1)) - Number(voters.has(a.ordinal + 1)) || Number(b.ready) - Number(a.ready) || a.ordinal - b.ordinal);
  if (candidates.length === 0) return { ok: false, error: except === null ? 'no pod answers' : `no pod other than pod ${except} answers` };
  let last: ProbeResult = { ok: false, error: 'no pod answers' };
  // Full disks: every pod asked refused the write at its own disk gate (507), none for want of a quorum.
  let allFull = true;
  for (const pod of candidates.slice(0, attempts)) {
    const base = brokerBase(deps.settings.brokerAccess, qc, spec, pod);
    if (!base) continue;
    last = await probeWrite(base, `pod ${pod.ordinal}`, undefined, undefined, await brokerToken(deps, qc));
    if (last.ok) return { ok: true, via: pod.ordinal };
    allFull &&= last.storageFull === true;
  }
  if (last.ok) return last;
  return allFull && last.storageFull ? last : { ok: false, error: last.error };
}
