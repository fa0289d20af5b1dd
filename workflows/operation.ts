// What every operation workflow shares: its input, the activity options (steps are activities,
// named in the UI by a one-line summary), the yield signal, and how it ends.
import {
  ActivityCancellationType,
  ApplicationFailure,
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
export function step(summary: string, kind: 'quick' | 'wait' = 'quick') {
  setCurrentDetails(summary);
  return proxyActivities<Activities>({ ...(kind === 'wait' ? WAIT : QUICK), summary });
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
