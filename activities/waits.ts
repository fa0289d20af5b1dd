// The wait machinery of the steps. A wait for the machine looks at its cluster until a check says
// it is done, inside one heartbeating activity, and writes what holds it into status as it
// changes; a look may read from the process's watches, and a change of the cluster's objects wakes
// the next one. A wait for a person does not stay in the activity: the hold is written into
// status with a token of what the cluster is, and the step ends `parked`; the workflow waits
// until the watcher signals that the cluster changed (or, for a hold lifted outside the
// QueenCluster, a durable timer), then runs the step again. Which is which is the gate's
// (LIFTED_BY in plan/gates.ts).
import { createHash } from 'node:crypto';
import { Context, sleep } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Phase, QueenCluster } from '../crd/schema.ts';
import { liftOf, type GateName, type Lift, type ParkedHold } from '../plan/gates.ts';
import type { Observation } from '../plan/observation.ts';
import { OPERATION_PHASE, OPERATION_TYPES } from '../plan/decide.ts';
import type { OwnedObjects } from './cluster-cache.ts';
import { gateWait } from '../metrics.ts';
import {
  beat,
  brokerRefusal,
  loadCluster,
  observeCluster,
  opLogger,
  watchedCluster,
  writePhase,
  writeStep,
  type ActivityDeps,
  type ClusterRef,
  type StepStatus,
} from './common.ts';
import { getStatefulSet, listClaims, listPods } from './kube.ts';
import { claimObservation, podObservation } from './observe.ts';
import { names } from './resources.ts';

/**
 * Ends a waiting step when this replica stops, with a failure Temporal retries at once on another
 * replica (a wait is a loop of looks, so the next attempt simply looks again).
 */
export function handOverIfStopping(deps: ActivityDeps): void {
  if (deps.stopping?.aborted) {
    throw ApplicationFailure.retryable('this operator replica is stopping: another one takes the step over', 'ReplicaStopping');
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

export interface Hold extends StepStatus {
  /**
   * When to look again, if sooner than the poll interval (ms since the epoch): when what holds the
   * step lifts by time alone (another pod's minimum Ready time running out), or soon when only
   * the brokers can show it lift (a learner near the end of its catch-up).
   */
  lookAgainAt?: number;
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
 * learner's catch-up) is still seen at the next poll. An object that is gone (a pod that stopped,
 * a claim deleted) wakes the look at once: it ends a stop rather than begins a burst, and the
 * steps that wait for a pod to be gone are the ones it lets go on.
 */
export class ChangeWake {
  private changed = false;
  private gone = false;
  private wake: (() => void) | null = null;
  private readonly off: () => void;

  constructor(deps: ActivityDeps, ref: ClusterRef) {
    this.off =
      deps.cache?.onChange((namespace, name, what) => {
        if (what === 'status' || namespace !== ref.namespace || name !== ref.name) return;
        this.changed = true;
        if (what === 'gone') this.gone = true;
        this.wake?.();
      }) ?? (() => undefined);
  }

  /** A look begins: it sees every change until now. */
  looking(): void {
    this.changed = false;
    this.gone = false;
  }

  /**
   * Until `ms` passed or a change came, but not sooner than `earliest` (performance.now()) unless
   * an object is gone, and never later than `ms` from now (a change does not delay a poll).
   */
  async next(sleepFor: (ms: number) => Promise<void>, ms: number, earliest: number): Promise<void> {
    earliest = Math.min(earliest, performance.now() + ms);
    if (!this.changed) await this.until(sleepFor(ms));
    // A change seen before the gap is over: the look waits for the gap, unless an object goes
    // meanwhile (another change wakes this only to see whether it is one that went).
    let left = earliest - performance.now();
    while (this.changed && !this.gone && left > 0) {
      if (!(await this.until(sleepFor(left)))) return;
      left = earliest - performance.now();
    }
  }

  /** Until the sleep is over (false) or a change came (true). */
  private async until(slept: Promise<void>): Promise<boolean> {
    const woken = await Promise.race([slept.then(() => false), new Promise<boolean>((resolve) => (this.wake = () => resolve(true)))]);
    this.wake = null;
    return woken;
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
 * Adds to the time `gate` held the running activity: for a wait that looks again without holdUntil
 * (restartPod's eviction while the disruption budget refuses it, its wait for a pod whose node is down).
 */
export function accountHeld(ref: Pick<ClusterRef, 'namespace' | 'name'>, gate: GateName, ms: number): void {
  const activity = currentActivity();
  if (!activity || ms <= 0) return;
  const held = heldByGate.get(activity) ?? new Map<string, number>();
  heldByGate.set(activity, held);
  held.set(gate, (held.get(gate) ?? 0) + ms);
  gateWait.inc({ namespace: ref.namespace, name: ref.name, gate }, ms / 1000);
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

/** Thrown by a wait that parks, through whatever the step was doing; the step ends with `{ parked }`. */
export class Parking {
  readonly parked: ParkedHold;
  constructor(parked: ParkedHold) {
    this.parked = parked;
  }
}

/**
 * What the QueenCluster and what it owns are, as far as a parked wait cares: the spec (its
 * generation) and the annotations, each pod's uid, whether it runs, is Ready or stops, each
 * claim's uid and size, the StatefulSet. The watcher computes it from its watches at every change
 * and signals a parked operation whose token differs (watcher.ts); the wait computes it when it
 * parks, from the same watches where it can.
 */
export function wakeToken(qc: QueenCluster, owned: OwnedObjects): string {
  const name = qc.metadata.name;
  const pods = owned.pods
    .map((p) => podObservation(name, p))
    .filter((p) => p !== null)
    .map((p) => [p.ordinal, p.uid, p.running, p.ready, p.terminating])
    .sort();
  const claims = owned.claims
    .map((c) => claimObservation(name, c))
    .filter((c) => c !== null)
    .map((c) => [c.ordinal, c.uid, c.terminating, c.capacityBytes, c.resizePending])
    .sort();
  const sts = owned.statefulSet ? [owned.statefulSet.metadata?.uid, owned.statefulSet.spec?.replicas, !!owned.statefulSet.metadata?.deletionTimestamp] : null;
  const annotations = Object.entries(qc.metadata.annotations ?? {}).sort(([a], [b]) => a.localeCompare(b));
  const state = JSON.stringify([qc.metadata.uid, qc.metadata.generation, annotations, pods, claims, sts]);
  return createHash('sha256').update(state).digest('hex').slice(0, 16);
}

/** What the cluster owns, from the process's watches when they are fresh, else from the API server. */
async function ownedNow(deps: ActivityDeps, ref: ClusterRef): Promise<OwnedObjects> {
  const watched = watchedCluster(deps, ref);
  if (watched) return watched.owned;
  const [pods, claims, statefulSet] = await Promise.all([
    listPods(deps.kube, ref.namespace, ref.name),
    listClaims(deps.kube, ref.namespace),
    getStatefulSet(deps.kube, ref.namespace, names.statefulSet(ref.name)),
  ]);
  return { pods, claims, statefulSet, services: [] };
}

/**
 * Parks a hold: status says it (with the token the watcher compares, and since when it waits for a
 * person), then the step ends through Parking.
 */
async function park(deps: ActivityDeps, ref: ClusterRef, hold: Hold, lift: Exclude<Lift, 'machine'>, read: QueenCluster | undefined): Promise<never> {
  const qc = read ?? (await loadCluster(deps, ref));
  const token = wakeToken(qc, await ownedNow(deps, ref));
  const before = qc.status?.operation?.parked;
  // The same hold parked again keeps the time it began.
  const since = before && qc.status?.operation?.gate === (hold.gate ?? null) && before.since ? before.since : new Date().toISOString();
  await writePhase(deps, ref, hold.phase, hold.message, { operation: { step: hold.message, gate: hold.gate ?? null, parked: { lift, since, token } } }, qc);
  opLogger(deps, ref).info({ phase: hold.phase, gate: hold.gate, lift }, `parked: ${hold.message}`);
  throw new Parking({ gate: hold.gate ?? null, phase: hold.phase, message: hold.message, lift, ...(hold.lookAgainAt !== undefined ? { lookAgainAt: hold.lookAgainAt } : {}) });
}

/**
 * A wait that parked before is over: status no longer says it waits for a person, nor shows the
 * hold's phase (a Blocked that a person lifted). The line says the operation goes on; its next
 * step writes its own. Read from the API server when the wait's check did not keep what it read.
 */
async function unpark(deps: ActivityDeps, ref: ClusterRef, read: QueenCluster | undefined): Promise<void> {
  const qc = read?.status?.operation?.parked ? read : await loadCluster(deps, ref);
  const op = qc.status?.operation;
  if (!op?.parked) return;
  const type = OPERATION_TYPES.find((t) => t === op.type);
  const phase = type ? OPERATION_PHASE[type] : (qc.status?.phase ?? 'Ready');
  const line = `${op.type} goes on: the hold is lifted (${op.gate ?? 'a hold'})`;
  await writePhase(deps, ref, phase, line, { operation: { step: line, gate: null, parked: null } }, qc);
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
    if ('done' in r) {
      if (ref.parkedBefore) await unpark(deps, ref, look.read);
      return { result: r.done };
    }
    // No leader's view because the brokers refuse the operator's credentials: say that.
    const refused = r.hold.gate === 'leader-known' ? brokerRefusal(ref.uid) : undefined;
    if (refused) r = { hold: { phase: 'Blocked', message: refused, gate: 'broker-credentials' } };
    const lift = liftOf(r.hold.gate, r.hold.phase);
    if (ref.parks && lift !== 'machine') return park(deps, ref, r.hold, lift, look.read);
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
 * objects change (ChangeWake), but not sooner than WOKEN_LOOK_GAP_MS after it began unless one of
 * them is gone. Ends with a
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
      await changes.next((ms) => pause(deps, ms), r.againInMs, began + WOKEN_LOOK_GAP_MS);
    }
  } finally {
    changes.close();
  }
}
