// What every operation workflow shares: its input, the activity options (steps are activities,
// named in the UI by a one-line summary), the yield signal, how it waits for a person, and how
// it ends.
//
// A wait for the machine (a pod becoming Ready, a learner catching up) is a step: one activity
// that looks until its gate opens. A wait for a person (an approval, the end of a pause, a
// decision about a failed version, every Blocked hold) is the workflow's: the step ends `parked`
// at once, and the workflow waits for the watcher's look-again signal, which it sends when the
// QueenCluster or what it owns changes (and, for a hold lifted outside the QueenCluster, for a
// durable timer too). Then it runs the step again. No worker slot is held meanwhile, and what the
// wait concluded is in the workflow's history.
import {
  ActivityCancellationType,
  ApplicationFailure,
  AsyncLocalStorage,
  CancellationScope,
  condition,
  defineSignal,
  isCancellation,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { Activities, ClusterRef } from '../activities/index.ts';
import { isParked, type Parked, type ParkedHold } from '../plan/gates.ts';
import type { OperationType } from '../plan/decide.ts';
import { resumeHint } from '../plan/format.ts';

export { resumeHint };

export interface OperationInput {
  ref: ClusterRef;
  /** What the operation was started for (see plan/decide.ts) and the retry annotation then. */
  fingerprint: string;
  target: string;
  retryToken: string;
}

/** Asks a running operation to stop at its next safe point so a more urgent one can run. */
export const yieldSignal = defineSignal<[string]>('yield');

/**
 * Tells an operation that waits for a person (a step that ended `parked`) that its QueenCluster,
 * or what it owns, changed: it runs the step again, which looks. Sent by the watcher when the
 * token recorded in status.operation.parked no longer matches the cluster.
 */
export const lookAgainSignal = defineSignal('look-again');

/**
 * The patch behind which an operation waits for a person in the workflow, not in a step (issue
 * #33): its wait steps end `parked` on a hold only a person lifts. Runs recorded before it wait in
 * the step, as they did.
 */
export const PARK_WAITS = 'park-waits';

/** How an operation waits for a person: whether its steps park, and the look-again signals it got. */
interface Parking {
  parks: boolean;
  wakes: number;
}

/** The operation's own parking, for the steps its body runs (workflow-local: AsyncLocalStorage). */
const parking = new AsyncLocalStorage<Parking>();

/**
 * The first look again at a hold lifted outside the QueenCluster, doubling up to the last: what
 * lifts it (a Role granted, a Secret's key written) is nothing the operator watches, so a person
 * who fixed it sees the step go on within minutes. Counted afresh for each new hold.
 */
const OUTSIDE_LOOK_AGAIN = { firstMs: 30_000, lastMs: 5 * 60_000 };

/**
 * The patch behind which only a look the timer asked for doubles the next one. Before it, every
 * look did, those the watcher woke included: a cluster whose pods were still starting woke a
 * parked formation four times in two seconds, and its next look came four minutes later, long
 * after the person had granted what it waited for (e2e credentials).
 */
export const BACKOFF_BY_TIMER = 'outside-backoff-by-timer';

/**
 * Waits after a step parked: until the watcher says the cluster changed; for a hold lifted outside
 * the QueenCluster, at most the `n`th look-again time; and at most until the time the step said it
 * must look again by (durable timers). The Web UI's details say what it waits for.
 */
async function waitForAPerson(p: Parking, hold: ParkedHold, summary: string, n: number): Promise<'woken' | 'timer'> {
  const seen = p.wakes;
  setCurrentDetails(`${summary}: waits for ${hold.lift === 'person' ? 'a person' : 'a change outside the QueenCluster'} (${hold.gate ?? 'no gate'}): ${hold.message}`);
  const backoff = hold.lift === 'outside' ? Math.min(OUTSIDE_LOOK_AGAIN.firstMs * 2 ** n, OUTSIDE_LOOK_AGAIN.lastMs) : Infinity;
  const due = hold.lookAgainAt !== undefined ? Math.max(1000, hold.lookAgainAt - Date.now()) : Infinity;
  const timeout = Math.min(backoff, due);
  let woken = true;
  if (Number.isFinite(timeout)) woken = await condition(() => p.wakes !== seen, timeout);
  else await condition(() => p.wakes !== seen);
  setCurrentDetails(summary);
  return woken ? 'woken' : 'timer';
}

/** Whether this operation's waits park (a run recorded before PARK_WAITS waits in its steps). */
export function waitsPark(): boolean {
  return parking.getStore()?.parks ?? false;
}

/** The activities as a workflow sees them: a step that parks is waited on and run again, never returned. */
type Unparked<A> = { [K in keyof A]: A[K] extends (...args: infer P) => Promise<infer R> ? (...args: P) => Promise<Exclude<R, Parked>> : A[K] };

/**
 * The wait steps of an operation whose waits park: each runs with `parks` on its cluster, and when
 * it ends `parked` the workflow waits for a person (waitForAPerson), then runs it again.
 */
function parkingSteps(acts: Activities, p: Parking, summary: string): Unparked<Activities> {
  return new Proxy(acts, {
    get(target, type) {
      const fn = target[type as keyof Activities] as unknown as (...args: unknown[]) => Promise<unknown>;
      return async (ref: ClusterRef, ...rest: unknown[]) => {
        let held = '';
        let n = 0;
        for (let again = false; ; again = true) {
          const r = await fn({ ...ref, parks: true, ...(again ? { parkedBefore: true } : {}) }, ...rest);
          if (!isParked(r)) return r;
          // Another hold than the last (a person fixed one thing, the next shows): looked at soon again.
          const now = `${r.parked.gate ?? ''}\n${r.parked.message}`;
          if (now !== held) n = 0;
          held = now;
          const ended = await waitForAPerson(p, r.parked, summary, n);
          // A look the watcher woke (the cluster's own objects changed) says nothing of what
          // outside it lifts the hold: the next look is not put off for it.
          if (ended === 'timer' || !patched(BACKOFF_BY_TIMER)) n++;
        }
      };
    },
  }) as unknown as Unparked<Activities>;
}

/**
 * Steps are retried with backoff as long as it takes (the API server or a broker may be away for a
 * while; a step failing for more than a few attempts says so in status), except what a retry
 * cannot change: the cluster gone, its StatefulSet gone, a refusal of the API server.
 */
const RETRY = {
  initialInterval: '1s',
  backoffCoefficient: 2,
  maximumInterval: '30s',
  nonRetryableErrorTypes: ['ClusterGone', 'NoStatefulSet', 'Refused'],
};

/**
 * Every step heartbeats every few seconds while it runs, whatever it does (activities/guard.ts),
 * so a step whose replica crashed is retried once its heartbeats stop, and a call that takes
 * longer than the timeout (a membership change may take 40 s) never starts a second attempt
 * beside the first. Quick steps (a few API calls) also end within their start-to-close.
 */
const QUICK: ActivityOptions = { startToCloseTimeout: '2 minutes', heartbeatTimeout: '20 seconds', retry: RETRY };

/** Waits: they poll until a gate opens, heartbeating, for as long as it takes. */
const WAIT: ActivityOptions = {
  startToCloseTimeout: '3650 days',
  heartbeatTimeout: '30 seconds',
  retry: RETRY,
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
};

/**
 * The activities of one step, with the step's line as its summary in the Temporal UI; the line is
 * also the workflow's current details (what the UI shows it is doing now).
 */
export function step(summary: string, kind: 'quick' | 'wait' = 'quick'): Unparked<Activities> {
  setCurrentDetails(summary);
  const acts = proxyActivities<Activities>({ ...(kind === 'wait' ? WAIT : QUICK), summary });
  const p = kind === 'wait' ? parking.getStore() : undefined;
  return p?.parks ? parkingSteps(acts, p, summary) : (acts as Unparked<Activities>);
}

/**
 * The patch behind which a yield asked for during a step that must finish (a pod's restart, the
 * end of a replacement) is said in status at once, rather than left unsaid until that step ends.
 */
export const YIELD_SAID = 'yield-said';

export const YIELDED = Symbol('yielded');

/**
 * The patch behind which ScaleVoters, GrowVolumes and ReplaceNode yield at their waits: runs that
 * began before it keep going as they were recorded (a yield signal they got then changed nothing).
 */
export const YIELD_AT_WAITS = 'yield-at-waits';

/**
 * Tracks the yield signal and runs steps that a yield interrupts: the waits, which are the safe
 * points. A signal that arrives during a step that must finish is honoured at the next wait.
 * With `enabled` false (a run recorded before it could yield) steps simply run.
 */
export function yieldable(enabled = true, ref?: ClusterRef) {
  let reason: string | null = null;
  let waiting = false;
  setHandler(yieldSignal, async (why: string) => {
    const first = reason === null;
    reason = why;
    // Not at a wait now: the step that runs must finish first. Status says so meanwhile.
    if (first && enabled && !waiting && ref && patched(YIELD_SAID)) {
      await step(`say that it yields to ${why} after this step`)
        .sayYieldPending(ref, { yieldTo: why })
        .catch(() => undefined);
    }
  });
  return {
    get requested() {
      return reason;
    },
    /** Runs `fn`, cancelling it when a yield arrives; returns YIELDED then. */
    async run<T>(fn: () => Promise<T>): Promise<T | typeof YIELDED> {
      if (!enabled) return fn();
      if (reason !== null) return YIELDED;
      const scope = new CancellationScope();
      let done = false;
      // Ends with the step (done) or cancels it on a yield; a cancelled workflow rejects it, handled.
      void condition(() => reason !== null || done).then(
        () => {
          if (!done) scope.cancel();
        },
        () => undefined,
      );
      waiting = true;
      try {
        return await scope.run(fn);
      } catch (err) {
        if (isCancellation(err) && reason !== null && !CancellationScope.current().consideredCancelled) return YIELDED;
        throw err;
      } finally {
        done = true;
        waiting = false;
      }
    },
  };
}

/** The type of the application failure behind an error (an activity's failure is its cause). */
export function failureType(err: unknown): string | null {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (e instanceof ApplicationFailure && e.type) return e.type;
  }
  return null;
}

/** The innermost message of an error chain: what actually went wrong. */
export function failureMessage(err: unknown): string {
  let msg = String(err);
  for (let e: unknown = err; e instanceof Error; e = e.cause) msg = e.message;
  return msg;
}

/** How an operation's body ends (RolledBack: an upgrade that failed and put the pods it moved back). */
export type Outcome = { result: 'Succeeded' | 'Failed' | 'Yielded' | 'RolledBack'; message: string };

export interface OperationShape {
  type: OperationType;
  phase: 'Forming' | 'Upgrading' | 'Scaling' | 'Replacing' | 'Resizing' | 'Promoting' | 'SwitchingOver';
  /** The first line status.message shows. */
  message: string;
  /** The line status keeps when the operation is cancelled (may ask the cluster, not cancellable). */
  cancelled: () => Promise<string>;
  /** Prefix of the line when it fails. */
  failed: string;
}

/**
 * Runs an operation: status.operation at the start, status.lastOperation at the end, whatever
 * the end (succeeded, failed, yielded, cancelled). A cancelled workflow is recorded, then ends
 * as cancelled in Temporal too.
 */
export async function runOperation(input: OperationInput, shape: OperationShape, body: () => Promise<Outcome>): Promise<string> {
  const p: Parking = { parks: patched(PARK_WAITS), wakes: 0 };
  if (p.parks) {
    setHandler(lookAgainSignal, () => {
      p.wakes++;
    });
  }
  return parking.run(p, () => operation(input, shape, body));
}

async function operation(input: OperationInput, shape: OperationShape, body: () => Promise<Outcome>): Promise<string> {
  const startedAt = await step('the operation begins').beginOperation(input.ref, {
    type: shape.type,
    phase: shape.phase,
    message: shape.message,
    target: input.target,
    fingerprint: input.fingerprint,
    retryToken: input.retryToken,
  });
  const end = (result: Outcome['result'] | 'Cancelled', message: string) =>
    CancellationScope.nonCancellable(() =>
      step(message).endOperation(input.ref, {
        type: shape.type,
        result,
        message,
        target: input.target,
        fingerprint: input.fingerprint,
        retryToken: input.retryToken,
        startedAt,
      }),
    );
  let outcome: Outcome;
  try {
    outcome = await body();
  } catch (err) {
    if (failureType(err) === 'ClusterGone') return 'the QueenCluster is gone';
    if (isCancellation(err)) {
      const message = await CancellationScope.nonCancellable(shape.cancelled);
      await end('Cancelled', message);
      throw err;
    }
    // Without a StatefulSet nothing goes on until the cluster is formed again: that comes first
    // (it is more urgent), then this operation starts again for what is still needed.
    if (failureType(err) === 'NoStatefulSet' && patched('no-statefulset-yields')) {
      const again = shape.type === 'FormCluster' ? 'forming the cluster starts again and makes it' : 'it starts again once the cluster is formed again';
      const message = `${shape.type} stopped: the StatefulSet ${input.ref.name} is gone; ${again}`;
      await end('Yielded', message);
      return message;
    }
    // A failed operation shows Blocked with its message until a retry (or a new spec) asks again.
    await end('Failed', `${shape.failed}: ${failureMessage(err)}; ${resumeHint(input.ref)}`);
    throw err;
  }
  await end(outcome.result, outcome.message);
  return outcome.message;
}
