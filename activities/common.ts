// What every activity shares: loading the cluster it works on, writing the running operation's
// step into status, waiting on a gate inside one heartbeating activity, and the write probe.
import { activityInfo, Context, heartbeat, sleep } from '@temporalio/activity';
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
import { getCluster, patchClusterStatus, recordEvent, statusCode, type EventStep, type Kube } from './kube.ts';
import { clusterConditions } from './status.ts';
import { readAnnotations } from '../crd/annotations.ts';
import { brokerBase, observe } from './observe.ts';
import type { Settings } from './settings.ts';
import { gateWait } from '../metrics.ts';
import { standbyProbe } from '../plan/link.ts';

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

/**
 * Ends a waiting step when this replica stops, with a failure Temporal retries at once on another
 * replica (a wait is a loop of looks, so the next attempt simply looks again).
 */
export function handOverIfStopping(deps: ActivityDeps): void {
  if (deps.stopping?.aborted) {
    throw ApplicationFailure.retryable('this operator replica is stopping: another one takes the step over', 'ReplicaStopping');
  }
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

/** Sleeps for a poll interval; wakes up early when the activity is cancelled or the replica stops. */
export async function pause(deps: ActivityDeps, ms: number): Promise<void> {
  if (deps.stopping?.aborted) return;
  const signal = deps.stopping;
  if (!signal) return sleep(ms);
  let onAbort: (() => void) | undefined;
  try {
    await Promise.race([sleep(ms), new Promise<void>((resolve) => signal.addEventListener('abort', (onAbort = () => resolve()), { once: true }))]);
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

/** The QueenCluster an operation works on; the uid tells a re-created object of the same name apart. */
export interface ClusterRef {
  namespace: string;
  name: string;
  uid: string;
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

/** Mirrors the running step into status: phase, message, and operation.step / operation.gate. */
export async function writeStep(deps: ActivityDeps, ref: ClusterRef, step: StepStatus, read?: QueenCluster) {
  await writePhase(deps, ref, step.phase, step.message, { operation: { step: step.message, gate: step.gate ?? null } }, read);
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
export async function stepEvent(deps: ActivityDeps, qc: QueenCluster, reason: string, message: string, type: 'Normal' | 'Warning' = 'Normal', perAttempt = false) {
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

export interface Hold extends StepStatus {
  /**
   * When to look again, if sooner than the poll interval (ms since the epoch): when what holds the
   * step lifts by time alone (another pod's minimum Ready time running out), or soon when only
   * the brokers can show it lift (a learner near the end of its catch-up).
   */
  lookAgainAt?: number;
}
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

/**
 * One look of a wait at its cluster. A look may read the QueenCluster and what it owns from the
 * process's watches when they are fresh: no request to the API server for them. A watch lags the
 * API server by a moment and never shows what was not so, so such a look can only hold a step a
 * moment too long, and the change it waits for wakes the next look. A wait never ends on one: a
 * check that finds its step done on a look from the watches is run again on one from the API
 * server (holdUntil does it), and that answer ends the wait. On a look from the watches a check
 * only reads: where it would act (a write probe, a drain) it answers ASK_THE_API_SERVER instead.
 */
export class Look {
  /** This look read the QueenCluster from the watches: it ends no wait. */
  fromWatch = false;
  /** The QueenCluster as this look read it last (a status line of the wait is written on it). */
  read: QueenCluster | undefined;
  private owned: OwnedObjects | undefined;
  private readonly deps: ActivityDeps;
  private readonly ref: ClusterRef;
  private readonly mayWatch: boolean;

  constructor(deps: ActivityDeps, ref: ClusterRef, mayWatch: boolean) {
    this.deps = deps;
    this.ref = ref;
    this.mayWatch = mayWatch;
  }

  /** The QueenCluster as it is now (from the watches on a watch look, while they have it and are fresh). */
  async cluster(): Promise<QueenCluster> {
    const watched = this.mayWatch ? watchedCluster(this.deps, this.ref) : null;
    if (watched) {
      this.fromWatch = true;
      this.owned = watched.owned;
      this.read = watched.cluster;
      return watched.cluster;
    }
    this.fromWatch = false;
    this.owned = undefined;
    this.read = await loadCluster(this.deps, this.ref);
    return this.read;
  }

  /** The cluster observed: its objects as cluster() read them (the watches' or the API server's), the brokers asked now. */
  observe(qc: QueenCluster): Promise<Observation> {
    return observeCluster(this.deps, qc, this.owned);
  }
}

/** What a look from the watches answers when what comes next (an end, a drain) is the API server's to say. */
export const ASK_THE_API_SERVER = { askTheApiServer: true } as const;

export type Check<T> = (look: Look) => Promise<{ done: T } | { hold: Hold } | typeof ASK_THE_API_SERVER>;

/**
 * The least time from one look of a wait to the next that a change wakes: the events of a pod
 * coming up arrive in bursts, and one look sees the whole burst.
 */
export const WOKEN_LOOK_GAP_MS = 200;

/**
 * Wakes a wait when its cluster or an object the cluster owns changes (the process's watches): a
 * step held by a pod's state looks again as soon as the pod moves, not at the next poll. The
 * cluster's status (which the wait writes itself) wakes nothing; what only the brokers show (a
 * learner's catch-up) is still seen at the next poll.
 */
class ChangeWake {
  private changed = false;
  private wake: (() => void) | null = null;
  private readonly off: () => void;

  constructor(deps: ActivityDeps, ref: ClusterRef) {
    this.off =
      deps.cache?.onChange((namespace, name, what) => {
        if (what === 'status' || namespace !== ref.namespace || name !== ref.name) return;
        this.changed = true;
        this.wake?.();
      }) ?? (() => undefined);
  }

  /** A look begins: it sees every change until now. */
  looking(): void {
    this.changed = false;
  }

  /** Until `ms` passed or a change came, but not sooner than `earliest` (performance.now()). */
  async next(deps: ActivityDeps, ms: number, earliest: number): Promise<void> {
    if (!this.changed) {
      await Promise.race([pause(deps, ms), new Promise<void>((resolve) => (this.wake = resolve))]);
      this.wake = null;
    }
    const left = earliest - performance.now();
    if (this.changed && left > 0) await pause(deps, left);
  }

  close(): void {
    this.off();
    this.wake = null;
  }
}

/** The time each named gate held the running activity's waits (ms), read by the worker when it ends. */
const heldByGate = new WeakMap<object, Map<string, number>>();

function currentActivity(): object | null {
  try {
    return Context.current();
  } catch {
    return null;
  }
}

/**
 * Which named gates held the activity that just ran, and how long each, in words
 * ("pod-ready-for-min-ready-seconds 25 s, write-commits 0.4 s"); null when none held it.
 */
export function gatesHeld(activity: object): string | null {
  const held = heldByGate.get(activity);
  if (!held || held.size === 0) return null;
  const secs = (ms: number) => (ms >= 10_000 ? String(Math.round(ms / 1000)) : (Math.round(ms / 100) / 10).toString());
  return [...held.entries()].map(([gate, ms]) => `${gate} ${secs(ms)} s`).join(', ');
}

/**
 * Waits inside one activity until `check` is done: it looks again every pollMs, as soon as the
 * cluster's objects change (ChangeWake), or when the hold lifts by time alone (lookAgainAt),
 * heartbeats each time (so a cancel reaches it, and a crashed worker is noticed), and writes the
 * reason it waits into status whenever the reason changes. Each look may read from the watches
 * (Look); one that finds the step done from them is taken again from the API server.
 */
export async function holdUntil<T>(deps: ActivityDeps, ref: ClusterRef, check: Check<T>): Promise<T> {
  let shown = '';
  const log = opLogger(deps, ref);
  // The time since the last look goes to the gate that held the step then.
  let heldBy: string | null = null;
  let since = performance.now();
  const activity = currentActivity();
  const held = activity ? (heldByGate.get(activity) ?? new Map<string, number>()) : new Map<string, number>();
  if (activity) heldByGate.set(activity, held);
  const account = () => {
    const now = performance.now();
    if (heldBy) {
      gateWait.inc({ namespace: ref.namespace, name: ref.name, gate: heldBy }, (now - since) / 1000);
      held.set(heldBy, (held.get(heldBy) ?? 0) + (now - since));
    }
    since = now;
  };
  return looksUntil<T>(deps, ref, async () => {
    let look = new Look(deps, ref, true);
    let r = await check(look);
    if (('done' in r && look.fromWatch) || 'askTheApiServer' in r) r = await check((look = new Look(deps, ref, false)));
    if ('askTheApiServer' in r) throw new Error('a wait asked for a look from the API server on one from the API server');
    account();
    if ('done' in r) return { result: r.done };
    // No leader's view because the brokers refuse the operator's credentials: say that.
    const refused = r.hold.gate === 'leader-known' ? authProblems.get(ref.uid) : undefined;
    if (refused) r = { hold: { phase: 'Blocked', message: refused, gate: 'broker-credentials' } };
    heldBy = r.hold.gate ?? 'unnamed';
    const key = `${r.hold.phase}|${r.hold.message}|${r.hold.gate ?? ''}`;
    if (key !== shown) {
      // On the object the look read (the wait's own status lines are all a wait writes; a yield ends it).
      await writeStep(deps, ref, r.hold, look.read);
      log.info({ phase: r.hold.phase, gate: r.hold.gate }, r.hold.message);
      shown = key;
    }
    beat({ gate: r.hold.gate ?? null, message: r.hold.message });
    const lifts = r.hold.lookAgainAt === undefined ? Infinity : Math.max(0, r.hold.lookAgainAt - Date.now());
    return { againInMs: Math.min(deps.settings.pollMs, lifts) };
  });
}

/**
 * Runs `look` until it has a result: again after the time it says, or as soon as the cluster's
 * objects change (ChangeWake), but not sooner than WOKEN_LOOK_GAP_MS after it began. Ends with a
 * failure Temporal retries elsewhere when this replica stops.
 */
export async function looksUntil<T>(deps: ActivityDeps, ref: ClusterRef, look: () => Promise<{ result: T } | { againInMs: number }>): Promise<T> {
  const changes = new ChangeWake(deps, ref);
  try {
    for (;;) {
      handOverIfStopping(deps);
      const began = performance.now();
      changes.looking();
      const r = await look();
      if ('result' in r) return r.result;
      await changes.next(deps, r.againInMs, began + WOKEN_LOOK_GAP_MS);
    }
  } finally {
    changes.close();
  }
}

/** Why the brokers refused the operator at the last look at each cluster (by uid). */
const authProblems = new Map<string, string>();

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
