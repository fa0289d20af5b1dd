// What every operation workflow shares: its input, the activity options (steps are activities,
// named in the UI by a one-line summary), the yield signal, and how it ends.
import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  condition,
  defineSignal,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { Activities, ClusterRef } from '../activities/index.ts';
import type { OperationType } from './plan/decide.ts';

export interface OperationInput {
  ref: ClusterRef;
  /** What the operation was started for (see plan/decide.ts) and the retry annotation then. */
  fingerprint: string;
  target: string;
  retryToken: string;
}

/** The command a cancelled operation's message ends with: a new retry token starts it again. */
export const resumeHint = (ref: ClusterRef) =>
  `to resume: kubectl -n ${ref.namespace} annotate queencluster ${ref.name} queenmq.com/retry=$(date +%s) --overwrite`;

/** Asks a running operation to stop at its next safe point so a more urgent one can run. */
export const yieldSignal = defineSignal<[string]>('yield');

const RETRY = {
  initialInterval: '1s',
  backoffCoefficient: 2,
  maximumInterval: '30s',
  nonRetryableErrorTypes: ['ClusterGone', 'NoStatefulSet'],
};

/** Quick steps: a few API calls. */
const QUICK: ActivityOptions = { startToCloseTimeout: '2 minutes', retry: RETRY };

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

export const YIELDED = Symbol('yielded');

/** Tracks the yield signal and runs steps that a yield interrupts. */
export function yieldable() {
  let reason: string | null = null;
  setHandler(yieldSignal, (why: string) => {
    reason = why;
  });
  return {
    get requested() {
      return reason;
    },
    /** Runs `fn`, cancelling it when a yield arrives; returns YIELDED then. */
    async run<T>(fn: () => Promise<T>): Promise<T | typeof YIELDED> {
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
      try {
        return await scope.run(fn);
      } catch (err) {
        if (isCancellation(err) && reason !== null && !CancellationScope.current().consideredCancelled) return YIELDED;
        throw err;
      } finally {
        done = true;
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
  phase: 'Forming' | 'Upgrading' | 'Scaling' | 'Replacing' | 'Resizing';
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
    await end('Failed', `${shape.failed}: ${failureMessage(err)}`);
    throw err;
  }
  await end(outcome.result, outcome.message);
  return outcome.message;
}
