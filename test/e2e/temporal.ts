// What the Temporal server says about a cluster's operations: the runs of its workflow id, and
// the steps (activities) of a run, read from the server's history (as the Web UI shows them).
import { parseIdentity } from '../../identity.ts';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { temporal } from '@temporalio/proto';
import { getCluster, waitFor, type Scenario } from './harness.ts';

/** A history event's time (ms since the epoch), NaN when it has none. */
export function eventTimeMs(t: { seconds?: unknown; nanos?: unknown } | null | undefined): number {
  return t ? Number(t.seconds ?? 0) * 1000 + Math.floor(Number(t.nanos ?? 0) / 1e6) : NaN;
}

export interface Run {
  workflowId: string;
  runId: string;
  type: string;
  status: string;
  startTime: Date;
}

/** Every run of a workflow id, oldest first. */
export async function workflowRuns(s: Scenario, workflowId: string): Promise<Run[]> {
  const runs: Run[] = [];
  for await (const w of s.temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    runs.push({ workflowId: w.workflowId, runId: w.runId, type: w.type, status: w.status.name, startTime: w.startTime });
  }
  return runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
}

/**
 * The runs of an operation's workflow id once none is running. An operation writes its last status
 * (Ready, lastOperation) in its last activity, just before the run closes: a test that saw that
 * status waits here for the run to be closed as well.
 */
export async function settledRuns(s: Scenario, workflowId: string): Promise<Run[]> {
  let last: Run[] = [];
  return waitFor(
    `the runs of ${workflowId} closed`,
    async () => {
      last = await workflowRuns(s, workflowId);
      return last.length > 0 && last.every((r) => r.status !== 'RUNNING') ? last : undefined;
    },
    60_000,
    () => JSON.stringify(last.map((r) => [r.type, r.status])),
  );
}

/** The history events of a run. */
export async function historyEvents(s: Scenario, run: Pick<Run, 'workflowId' | 'runId'>) {
  const history = await s.temporal.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
  return history.events ?? [];
}

/** A payload's JSON value (an activity's result), undefined for an empty one (a step that returns nothing). */
const payloadJson = (p: { data?: Uint8Array | null } | null | undefined): unknown => (p?.data?.length ? JSON.parse(Buffer.from(p.data).toString('utf8')) : undefined);

/**
 * The Temporal history of the operation status.operation names, one line an event that says what
 * a wait did (steps scheduled and ended, timers started and fired, signals), with its time: what
 * explains an operation that did not go on (a step parked and never run again, a timer that did not
 * fire, a signal that did not come). Empty when no operation runs.
 */
export async function operationHistory(s: Scenario, name = 'queen'): Promise<string[]> {
  const op = (await getCluster(s, name)).status?.operation;
  if (!op?.workflowId || !op.runId) return [];
  const lines: string[] = [];
  const scheduled = new Map<string, string>();
  for (const e of await historyEvents(s, { workflowId: op.workflowId, runId: op.runId })) {
    const ms = eventTimeMs(e.eventTime);
    const at = Number.isNaN(ms) ? '?' : new Date(ms).toISOString().slice(11, 23);
    const a = e.activityTaskScheduledEventAttributes;
    if (a) {
      scheduled.set(String(e.eventId ?? ''), a.activityType?.name ?? '?');
      lines.push(`${at} scheduled ${a.activityType?.name}`);
    }
    const done = e.activityTaskCompletedEventAttributes;
    if (done) lines.push(`${at} completed ${scheduled.get(String(done.scheduledEventId ?? '')) ?? '?'} ${JSON.stringify(payloadJson(done.result?.payloads?.[0]) ?? '').slice(0, 200)}`);
    const failed = e.activityTaskFailedEventAttributes;
    if (failed) lines.push(`${at} failed ${scheduled.get(String(failed.scheduledEventId ?? '')) ?? '?'}: ${failed.failure?.message ?? ''}`);
    if (e.timerStartedEventAttributes) lines.push(`${at} timer ${Number(e.timerStartedEventAttributes.startToFireTimeout?.seconds ?? 0)}s started`);
    if (e.timerFiredEventAttributes) lines.push(`${at} timer fired`);
    if (e.workflowExecutionSignaledEventAttributes) lines.push(`${at} signal ${e.workflowExecutionSignaledEventAttributes.signalName}`);
    if (e.workflowTaskFailedEventAttributes) lines.push(`${at} workflow task failed: ${e.workflowTaskFailedEventAttributes.failure?.message ?? ''}`);
  }
  return [`${op.workflowId} ${op.runId}`, ...lines];
}

/**
 * The look-again timers a run's parked waits started: each with the hold it waited on (the last
 * step's parked result) and how many timers of that hold had fired before it.
 */
export async function lookAgainTimers(s: Scenario, run: Pick<Run, 'workflowId' | 'runId'>) {
  let hold = null as { gate: string; message: string } | null;
  let fired = 0;
  const timers: { gate: string; message: string; seconds: number; firedBefore: number }[] = [];
  for (const e of await historyEvents(s, run)) {
    const done = e.activityTaskCompletedEventAttributes;
    if (done) {
      const parked = (payloadJson(done.result?.payloads?.[0]) as { parked?: { gate: string; message: string } } | undefined)?.parked;
      if (parked?.gate !== hold?.gate || parked?.message !== hold?.message) fired = 0;
      hold = parked ?? null;
    }
    const started = e.timerStartedEventAttributes;
    if (started && hold) timers.push({ ...hold, seconds: Number(started.startToFireTimeout?.seconds ?? 0), firedBefore: fired });
    if (e.timerFiredEventAttributes && hold) fired++;
  }
  return timers;
}

/** The activity types a run scheduled, in order. */
export async function activityTypes(s: Scenario, run: Pick<Run, 'workflowId' | 'runId'>): Promise<string[]> {
  return (await historyEvents(s, run))
    .map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name)
    .filter((n): n is string => !!n);
}

/**
 * With QUEEN_RECORD_HISTORIES=1, saves a run's history to test/workflows/histories/<name>.binpb
 * (the protobuf the server sends): the replay test runs every saved history against the current
 * workflow code, so a change that would break operations in flight is caught before an operator
 * upgrade.
 */
export async function recordHistory(s: Scenario, run: Pick<Run, 'workflowId' | 'runId'>, name: string): Promise<void> {
  if (process.env.QUEEN_RECORD_HISTORIES !== '1') return;
  const history = await s.temporal.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
  const dir = fileURLToPath(new URL('../workflows/histories/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}${name}.binpb`, temporal.api.history.v1.History.encode(history).finish());
}

/**
 * The step a run is on and the operator replica working on it, as Temporal records it (the
 * worker's identity is `<pid>@<pod name>/<process token>`, identity.ts).
 */
export async function currentStep(s: Scenario, workflowId: string): Promise<{ activity: string; pod: string; attempt: number } | null> {
  const d = await s.temporal.workflow.getHandle(workflowId).describe();
  const pending = d.raw.pendingActivities ?? [];
  for (const a of pending) {
    const identity = a.lastWorkerIdentity ?? '';
    const worker = parseIdentity(identity);
    if (a.state === temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED && worker) {
      return { activity: a.activityType?.name ?? '', pod: worker.host, attempt: a.attempt ?? 1 };
    }
  }
  return null;
}

/** The results of a run's activities, in order, decoded (JSON payloads), with their activity type. */
export async function activityResults(s: Scenario, run: Pick<Run, 'workflowId' | 'runId'>): Promise<{ type: string; result: unknown }[]> {
  const events = await historyEvents(s, run);
  const typeOf = new Map<string, string>();
  const out: { type: string; result: unknown }[] = [];
  for (const e of events) {
    const scheduled = e.activityTaskScheduledEventAttributes;
    if (scheduled) typeOf.set(String(e.eventId), scheduled.activityType?.name ?? '');
    const done = e.activityTaskCompletedEventAttributes;
    if (done) {
      const result = payloadJson(done.result?.payloads?.[0]);
      out.push({ type: typeOf.get(String(done.scheduledEventId)) ?? '', result });
    }
  }
  return out;
}

/**
 * A run's completed activities in the order they were scheduled: the step line each carried as its
 * summary (what the Web UI shows), and the named gates that held it, read from the `held` of its
 * result ("pod-ready-for-min-ready-seconds 25 s, write-commits 0.4 s", worker.ts timeSteps).
 */
export async function heldSteps(s: Scenario, run: Pick<Run, 'workflowId' | 'runId'>): Promise<HeldStep[]> {
  const events = await historyEvents(s, run);
  const scheduled = new Map<string, { type: string; summary: string }>();
  const out: (HeldStep & { id: number })[] = [];
  for (const e of events) {
    const a = e.activityTaskScheduledEventAttributes;
    if (a) scheduled.set(String(e.eventId), { type: a.activityType?.name ?? '', summary: String(payloadJson(e.userMetadata?.summary) ?? '') });
    const done = e.activityTaskCompletedEventAttributes;
    if (done) {
      const result = payloadJson(done.result?.payloads?.[0]) as { held?: string } | undefined;
      const heldMs: Record<string, number> = {};
      for (const part of typeof result?.held === 'string' ? result.held.split(', ') : []) {
        const m = /^(\S+) ([\d.]+) s$/.exec(part);
        if (m) heldMs[m[1]!] = Number(m[2]) * 1000;
      }
      out.push({ id: Number(done.scheduledEventId), ...scheduled.get(String(done.scheduledEventId))!, held: Object.keys(heldMs), heldMs });
    }
  }
  return out.sort((a, b) => a.id - b.id).map(({ id: _id, ...step }) => step);
}

export interface HeldStep {
  type: string;
  summary: string;
  /** The gates that held it, in the order of its result's `held`. */
  held: string[];
  /** How long each held it (ms, as `held` says it: tenths of a second below 10 s, whole seconds above). */
  heldMs: Record<string, number>;
}

/** The steps (activities) a run has running or scheduled now: none while it waits for a person. */
export async function pendingSteps(s: Scenario, workflowId: string): Promise<string[]> {
  const d = await s.temporal.workflow.getHandle(workflowId).describe();
  return (d.raw.pendingActivities ?? []).map((a) => a.activityType?.name ?? '');
}
