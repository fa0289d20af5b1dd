// What the watcher reads of workflow runs beyond "is one running": the input a run was started
// with (the QueenCluster an observer belongs to; what an operation was started for), how a run
// ended, and whether a worker has taken its first task. With these it keeps status true when a
// run ends from outside (terminated, reset, timed out) or no worker picks an operation up.
import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { LastOperationStatus, OperationStatus, Phase } from '../crd/schema.ts';
import { OPERATION_PHASE, type OperationType } from '../plan/decide.ts';
import { resumeHint } from '../plan/format.ts';
import type { GateName } from '../plan/gates.ts';

/** HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT (temporal.api.enums.v1). */
const CLOSE_EVENT_ONLY = 2;
/** PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED: no worker has taken it. */
const TASK_SCHEDULED = 1;

/** How a run ended, from its close event. */
export interface RunEnd {
  status: 'COMPLETED' | 'FAILED' | 'CANCELED' | 'TERMINATED' | 'TIMED_OUT' | 'CONTINUED_AS_NEW';
  /** The reason given to `temporal workflow terminate` (or of a reset), or a failure's message. */
  reason: string | null;
  /** Who ended it (the CLI's or the Web UI's identity), if the server knows. */
  identity: string | null;
  at: string | null;
}

/** What an operation was started for (its OperationInput), as far as the run's input says. */
export interface StartedFor {
  uid: string | null;
  fingerprint: string | null;
  retryToken: string | null;
}

const ts = (t: { seconds?: unknown; nanos?: number | null } | null | undefined): string | null => {
  if (!t || t.seconds === undefined || t.seconds === null) return null;
  const ms = Number(t.seconds) * 1000 + Math.floor((t.nanos ?? 0) / 1e6);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : null;
};

export class Runs {
  private readonly inputs = new Map<string, unknown[] | null>();
  private readonly client: Client;
  constructor(client: Client) {
    this.client = client;
  }

  private get namespace(): string {
    return this.client.options.namespace;
  }

  /** The arguments a run was started with (from its first event), cached per run. */
  async input(workflowId: string, runId: string): Promise<unknown[] | null> {
    const key = `${workflowId}/${runId}`;
    if (this.inputs.has(key)) return this.inputs.get(key)!;
    const page = await this.client.workflowService.getWorkflowExecutionHistory({
      namespace: this.namespace,
      execution: { workflowId, runId },
      maximumPageSize: 1,
    });
    const payloads = page.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? null;
    let args: unknown[] | null = null;
    try {
      args = payloads ? payloads.map((p) => defaultPayloadConverter.fromPayload(p as never)) : null;
    } catch {
      args = null;
    }
    if (this.inputs.size > 1000) this.inputs.clear();
    this.inputs.set(key, args);
    return args;
  }

  /** The uid of the QueenCluster a run works for: its first argument's ref (an operation) or the ref itself (the observer). */
  async startedFor(workflowId: string, runId: string): Promise<StartedFor> {
    const args = await this.input(workflowId, runId);
    const first = (args?.[0] ?? null) as { uid?: unknown; ref?: { uid?: unknown }; fingerprint?: unknown; retryToken?: unknown } | null;
    const uid = typeof first?.ref?.uid === 'string' ? first.ref.uid : typeof first?.uid === 'string' ? first.uid : null;
    return {
      uid,
      fingerprint: typeof first?.fingerprint === 'string' ? first.fingerprint : null,
      retryToken: typeof first?.retryToken === 'string' ? first.retryToken : null,
    };
  }

  /** How a closed run ended; null while it runs. */
  async end(workflowId: string, runId: string): Promise<RunEnd | null> {
    const page = await this.client.workflowService.getWorkflowExecutionHistory({
      namespace: this.namespace,
      execution: { workflowId, runId },
      historyEventFilterType: CLOSE_EVENT_ONLY,
    });
    const e = page.history?.events?.at(-1);
    if (!e) return null;
    const at = ts(e.eventTime);
    if (e.workflowExecutionTerminatedEventAttributes) {
      const a = e.workflowExecutionTerminatedEventAttributes;
      return { status: 'TERMINATED', reason: a.reason || null, identity: a.identity || null, at };
    }
    if (e.workflowExecutionTimedOutEventAttributes) return { status: 'TIMED_OUT', reason: null, identity: null, at };
    if (e.workflowExecutionFailedEventAttributes) {
      return { status: 'FAILED', reason: e.workflowExecutionFailedEventAttributes.failure?.message || null, identity: null, at };
    }
    if (e.workflowExecutionCanceledEventAttributes) return { status: 'CANCELED', reason: null, identity: null, at };
    if (e.workflowExecutionContinuedAsNewEventAttributes) return { status: 'CONTINUED_AS_NEW', reason: null, identity: null, at };
    if (e.workflowExecutionCompletedEventAttributes) return { status: 'COMPLETED', reason: null, identity: null, at };
    return null;
  }
}

/**
 * A run that no worker has taken up: its first workflow task is still scheduled, not started,
 * `afterMs` after the run began. Null when a worker took it, or it is too early to say.
 */
export function waitingForWorker(d: WorkflowExecutionDescription, now: number, afterMs: number): { since: number } | null {
  if (d.status.name !== 'RUNNING') return null;
  const task = d.raw.pendingWorkflowTask;
  if (!task || task.state !== TASK_SCHEDULED) return null;
  // Only the first task: once a worker ran it, the operation wrote status.operation itself.
  if ((d.historyLength ?? 0) > 2) return null;
  const since = d.startTime.getTime();
  return now - since >= afterMs ? { since } : null;
}

/** PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED: no worker runs the attempt. */
const ACTIVITY_SCHEDULED = 1;
/** PendingActivityState.PENDING_ACTIVITY_STATE_STARTED: a worker took the attempt. */
const ACTIVITY_STARTED = 2;
/** A step that keeps failing is told from this attempt on (as activities/guard.ts does). */
const TELL_FROM_ATTEMPT = 3;

/** What holds a running operation that no step of it can say: the workers are gone, or fail at it. */
export type StuckRun =
  /** Its next task (a workflow task or a step's next attempt) has waited this long for a worker. */
  | { kind: 'no-worker'; since: number }
  /** A step whose attempts time out (the server's verdict, which the step never hears of). */
  | { kind: 'timing-out'; attempt: number; timeout: string }
  /** The operation's own code fails on the workers, task after task. */
  | { kind: 'task-failing'; attempt: number };

const TIMEOUT_WORDS: Record<number, string> = {
  1: 'it did not finish within its time',
  2: 'it was not taken up within its time',
  3: 'it did not finish within its time',
  4: 'no heartbeat within its time: the worker that ran it stopped answering',
};

const millis = (t: { seconds?: unknown; nanos?: number | null } | null | undefined): number | null => {
  const iso = ts(t);
  return iso ? Date.parse(iso) : null;
};

/**
 * A run that began and then stopped moving for a reason its own steps cannot report (no worker to
 * run them, attempts that time out, workflow code that fails): read from its pending workflow
 * task and activities. Null while it moves, or too early to say (`afterMs`).
 */
export function stuckRun(d: WorkflowExecutionDescription, now: number, afterMs: number): StuckRun | null {
  if (d.status.name !== 'RUNNING') return null;
  const task = d.raw.pendingWorkflowTask;
  if (task && (task.attempt ?? 1) >= TELL_FROM_ATTEMPT) return { kind: 'task-failing', attempt: task.attempt ?? TELL_FROM_ATTEMPT };
  if (task && task.state === TASK_SCHEDULED) {
    const since = millis(task.originalScheduledTime ?? task.scheduledTime);
    if (since !== null && now - since >= afterMs) return { kind: 'no-worker', since };
  }
  for (const a of d.raw.pendingActivities ?? []) {
    const timeout = a.lastFailure?.timeoutFailureInfo;
    if ((a.attempt ?? 1) >= TELL_FROM_ATTEMPT && timeout) {
      return { kind: 'timing-out', attempt: a.attempt ?? TELL_FROM_ATTEMPT, timeout: TIMEOUT_WORDS[Number(timeout.timeoutType ?? 0)] ?? 'it timed out' };
    }
    if (a.state !== ACTIVITY_SCHEDULED) continue;
    // Ready for a worker since its scheduling, or since the backoff after its last attempt ended.
    const times = [a.scheduledTime, a.lastAttemptCompleteTime, a.nextAttemptScheduleTime].map(millis).filter((t): t is number => t !== null);
    const since = times.length > 0 ? Math.max(...times) : null;
    if (since !== null && since <= now && now - since >= afterMs) return { kind: 'no-worker', since };
  }
  return null;
}

/** The line that says what holds an operation that is stuck (stuckRun), with its gate. */
export function stuckStatus(
  type: OperationType,
  recorded: { step?: string | null },
  stuck: StuckRun,
  run: { workflowId: string; taskQueue: string },
  now: number,
): { message: string; gate: GateName } {
  const step = recorded.step ?? type;
  switch (stuck.kind) {
    case 'no-worker':
      return {
        message: `waiting for a worker on task queue ${run.taskQueue}: ${type} has waited ${Math.round((now - stuck.since) / 1000)}s for a worker to take up its next step (${step}) (are the operator's workers running, on that task queue?)`,
        gate: 'worker-polling',
      };
    case 'timing-out':
      return { message: `${step}: attempt ${stuck.attempt} timed out (${stuck.timeout}); trying again`, gate: 'step-succeeds' };
    case 'task-failing':
      return {
        message: `${type} cannot go on: its workflow code failed ${stuck.attempt} times on the workers at "${step}" (an operator version that cannot run it?); see temporal workflow describe --workflow-id ${run.workflowId}`,
        gate: 'step-succeeds',
      };
  }
}

/** The status of an operation started but not taken up by any worker: the task queue, named. */
export function noWorkerStatus(
  type: OperationType,
  run: { workflowId: string; runId: string; taskQueue: string; since: number; target: string | null },
  now: number,
): { phase: Phase; message: string; operation: OperationStatus } {
  const waited = Math.round((now - run.since) / 1000);
  const step = `waiting for a worker on task queue ${run.taskQueue}`;
  return {
    phase: OPERATION_PHASE[type],
    message: `${step}: ${type} was started ${waited}s ago and no worker has taken it up (are the operator's workers running, on that task queue?)`,
    operation: {
      type,
      workflowId: run.workflowId,
      runId: run.runId,
      step,
      gate: 'worker-polling',
      ...(run.target ? { target: run.target } : {}),
      startedAt: new Date(run.since).toISOString(),
    },
  };
}

/**
 * status.lastOperation for an operation whose run ended without recording it: terminated by a
 * person (`temporal workflow terminate`, the Web UI, a reset), timed out, or failed in a way its
 * code never saw. Terminated and timed-out runs count as stopped by hand: not started again for
 * the same request until a retry is asked (the message says how).
 */
export function endedOutside(
  recorded: OperationStatus,
  end: RunEnd,
  startedFor: StartedFor,
  cluster: { namespace: string; name: string },
  now: Date,
): LastOperationStatus {
  const type = recorded.type;
  const by = end.identity ? ` by ${end.identity}` : '';
  const why = end.reason ? `: ${end.reason}` : '';
  let result: LastOperationStatus['result'] = 'Terminated';
  let how: string;
  switch (end.status) {
    case 'TERMINATED':
      how = `was terminated from outside${by}${why}`;
      break;
    case 'TIMED_OUT':
      how = 'ran out of its workflow timeout';
      break;
    case 'CANCELED':
      result = 'Cancelled';
      how = 'was cancelled before it could say so';
      break;
    case 'FAILED':
      result = 'Failed';
      how = `failed${why}`;
      break;
    default:
      result = 'Failed';
      how = `ended (${end.status.toLowerCase()}) without saying how`;
  }
  const step = recorded.step ? ` at the step "${recorded.step}"` : '';
  return {
    type,
    workflowId: recorded.workflowId,
    ...(recorded.runId ? { runId: recorded.runId } : {}),
    result,
    message: `${type}${recorded.target ? ` (${recorded.target})` : ''} ${how}${step}; ${resumeHint(cluster)}`,
    ...(recorded.target ? { target: recorded.target } : {}),
    ...(startedFor.fingerprint !== null ? { fingerprint: startedFor.fingerprint } : {}),
    ...(startedFor.retryToken !== null ? { retryToken: startedFor.retryToken } : {}),
    ...(recorded.startedAt ? { startedAt: recorded.startedAt } : {}),
    finishedAt: end.at ?? now.toISOString(),
  };
}

/** An attempt of a run that a process now gone had taken: it will neither finish nor heartbeat. */
export interface LostAttempt {
  activityId: string;
  activityType: string;
  attempt: number;
  identity: string;
}

/**
 * The started activities of a running workflow whose attempt was taken by a process of this host
 * that is gone (`gone`, see identity.ts): Temporal would try them again only after their heartbeat
 * timeout (up to a minute for an observer's round, when status stands still).
 */
export function lostAttempts(d: WorkflowExecutionDescription, gone: (identity: string) => boolean): LostAttempt[] {
  if (d.status.name !== 'RUNNING') return [];
  return (d.raw.pendingActivities ?? [])
    .filter((a) => a.state === ACTIVITY_STARTED && !!a.activityId && !!a.lastWorkerIdentity && gone(a.lastWorkerIdentity))
    .map((a) => ({ activityId: a.activityId!, activityType: a.activityType?.name ?? '', attempt: a.attempt ?? 1, identity: a.lastWorkerIdentity! }));
}
