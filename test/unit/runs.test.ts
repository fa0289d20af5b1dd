// What the watcher makes of runs it did not see end (issue 8, items 3 and 9): a run terminated
// from outside, timed out or failed unseen becomes status.lastOperation in words, with who ended
// it and how to resume; an operation no worker takes up names its task queue.
import type { WorkflowExecutionDescription } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import type { OperationStatus } from '../../crd/schema.ts';
import { endedOutside, noWorkerStatus, stuckRun, stuckStatus, waitingForWorker, type RunEnd } from '../../watcher/runs.ts';

const recorded: OperationStatus = {
  type: 'RollingUpgrade',
  workflowId: 'queencluster/queen/queen',
  runId: 'r1',
  target: '2.6.1',
  step: 'pod 1 is next: pod 2 has been Ready for less than 30s',
  startedAt: '2026-11-29T12:00:00.000Z',
};
const cluster = { namespace: 'queen', name: 'queen' };
const startedFor = { uid: 'u1', fingerprint: 'spec:abc', retryToken: '' };
const now = new Date('2026-11-29T12:05:00Z');

describe('a run that ended from outside', () => {
  it('terminated by a person: Terminated, with who, why, the step it was on and how to resume', () => {
    const end: RunEnd = { status: 'TERMINATED', reason: 'stuck, ended by hand', identity: 'temporal-cli:alice@laptop', at: '2026-11-29T12:04:00.000Z' };
    expect(endedOutside(recorded, end, startedFor, cluster, now)).toEqual({
      type: 'RollingUpgrade',
      workflowId: 'queencluster/queen/queen',
      runId: 'r1',
      result: 'Terminated',
      message:
        'RollingUpgrade (2.6.1) was terminated from outside by temporal-cli:alice@laptop: stuck, ended by hand at the step "pod 1 is next: pod 2 has been Ready for less than 30s"; ' +
        'to resume: kubectl -n queen annotate queencluster queen queenmq.com/retry=$(date +%s) --overwrite',
      target: '2.6.1',
      fingerprint: 'spec:abc',
      retryToken: '',
      startedAt: '2026-11-29T12:00:00.000Z',
      finishedAt: '2026-11-29T12:04:00.000Z',
    });
  });
  it('timed out counts as stopped too; a failure the code never saw is Failed with its message', () => {
    expect(endedOutside(recorded, { status: 'TIMED_OUT', reason: null, identity: null, at: null }, startedFor, cluster, now)).toMatchObject({
      result: 'Terminated',
      message: expect.stringMatching(/^RollingUpgrade \(2\.6\.1\) ran out of its workflow timeout at the step/),
      finishedAt: now.toISOString(),
    });
    expect(endedOutside(recorded, { status: 'FAILED', reason: 'nondeterminism', identity: null, at: null }, startedFor, cluster, now)).toMatchObject({
      result: 'Failed',
      message: expect.stringMatching(/^RollingUpgrade \(2\.6\.1\) failed: nondeterminism at the step/),
    });
  });
  it('without the run\'s input (an old run), no fingerprint is claimed', () => {
    const r = endedOutside(recorded, { status: 'TERMINATED', reason: null, identity: null, at: null }, { uid: null, fingerprint: null, retryToken: null }, cluster, now);
    expect(r).not.toHaveProperty('fingerprint');
    expect(r.message).toMatch(/^RollingUpgrade \(2\.6\.1\) was terminated from outside at the step/);
  });
});

const description = (over: { historyLength?: number; state?: number | null; startedAgoMs: number; status?: string }): WorkflowExecutionDescription =>
  ({
    status: { name: over.status ?? 'RUNNING' },
    historyLength: over.historyLength ?? 2,
    startTime: new Date(now.getTime() - over.startedAgoMs),
    taskQueue: 'queen-operator',
    raw: { pendingWorkflowTask: over.state === null ? null : { state: over.state ?? 1 } },
  }) as unknown as WorkflowExecutionDescription;

describe('an operation no worker takes up (issue 8, item 9)', () => {
  it('is said once its first task has waited, not before, and not once a worker took it', () => {
    expect(waitingForWorker(description({ startedAgoMs: 12_000 }), now.getTime(), 10_000)).toEqual({ since: now.getTime() - 12_000 });
    expect(waitingForWorker(description({ startedAgoMs: 3_000 }), now.getTime(), 10_000)).toBeNull();
    expect(waitingForWorker(description({ startedAgoMs: 12_000, state: 2 }), now.getTime(), 10_000)).toBeNull();
    expect(waitingForWorker(description({ startedAgoMs: 12_000, state: null, historyLength: 9 }), now.getTime(), 10_000)).toBeNull();
    expect(waitingForWorker(description({ startedAgoMs: 12_000, status: 'TERMINATED' }), now.getTime(), 10_000)).toBeNull();
  });
  it('names the task queue in the phase of the operation', () => {
    const st = noWorkerStatus('FormCluster', { workflowId: 'w', runId: 'r', taskQueue: 'queen-operator-queen', since: now.getTime() - 12_000, target: '3 voters on 2.6.0' }, now.getTime());
    expect(st.phase).toBe('Forming');
    expect(st.message).toBe(
      "waiting for a worker on task queue queen-operator-queen: FormCluster was started 12s ago and no worker has taken it up (are the operator's workers running, on that task queue?)",
    );
    expect(st.operation).toMatchObject({ type: 'FormCluster', runId: 'r', gate: 'worker-polling', step: 'waiting for a worker on task queue queen-operator-queen' });
  });
});

describe('a run that began and then stopped moving (stuckRun)', () => {
  const at = (msAgo: number) => {
    const t = now.getTime() - msAgo;
    return { seconds: Math.floor(t / 1000), nanos: (t % 1000) * 1e6 };
  };
  const running = (raw: Record<string, unknown>) => ({ status: { name: 'RUNNING' }, historyLength: 40, raw }) as unknown as WorkflowExecutionDescription;
  const run = { workflowId: 'queencluster/queen/queen', taskQueue: 'queen-operator' };

  it('a step whose next attempt no worker takes up: waiting for a worker, from when it was ready', () => {
    const d = running({ pendingActivities: [{ state: 1, attempt: 2, scheduledTime: at(120_000), lastAttemptCompleteTime: at(25_000) }] });
    const stuck = stuckRun(d, now.getTime(), 10_000);
    expect(stuck).toEqual({ kind: 'no-worker', since: now.getTime() - 25_000 });
    expect(stuckStatus('RollingUpgrade', recorded, stuck!, run, now.getTime())).toEqual({
      message:
        "waiting for a worker on task queue queen-operator: RollingUpgrade has waited 25s for a worker to take up its next step (pod 1 is next: pod 2 has been Ready for less than 30s) (are the operator's workers running, on that task queue?)",
      gate: 'worker-polling',
    });
  });
  it('the next workflow task not taken up: waiting for a worker too', () => {
    expect(stuckRun(running({ pendingWorkflowTask: { state: 1, attempt: 1, scheduledTime: at(15_000) } }), now.getTime(), 10_000)).toEqual({ kind: 'no-worker', since: now.getTime() - 15_000 });
  });
  it('nothing to say while it moves: a step running, a retry still in its backoff, a task just scheduled', () => {
    expect(stuckRun(running({ pendingActivities: [{ state: 2, attempt: 1, scheduledTime: at(600_000) }] }), now.getTime(), 10_000)).toBeNull();
    expect(stuckRun(running({ pendingActivities: [{ state: 1, attempt: 2, scheduledTime: at(600_000), nextAttemptScheduleTime: at(-5_000) }] }), now.getTime(), 10_000)).toBeNull();
    expect(stuckRun(running({ pendingWorkflowTask: { state: 1, attempt: 1, scheduledTime: at(2_000) } }), now.getTime(), 10_000)).toBeNull();
    expect(stuckRun(running({}), now.getTime(), 10_000)).toBeNull();
  });
  it('attempts that time out, from the third: said with the step and what timed out', () => {
    const d = running({ pendingActivities: [{ state: 2, attempt: 3, scheduledTime: at(600_000), lastFailure: { message: 'activity Heartbeat timeout', timeoutFailureInfo: { timeoutType: 4 } } }] });
    const stuck = stuckRun(d, now.getTime(), 10_000)!;
    expect(stuckStatus('RollingUpgrade', recorded, stuck, run, now.getTime())).toEqual({
      message: 'pod 1 is next: pod 2 has been Ready for less than 30s: attempt 3 timed out (no heartbeat within its time: the worker that ran it stopped answering); trying again',
      gate: 'step-succeeds',
    });
    // The second attempt after one timeout (a worker that went away) is no news.
    expect(stuckRun(running({ pendingActivities: [{ state: 2, attempt: 2, lastFailure: { timeoutFailureInfo: { timeoutType: 4 } } }] }), now.getTime(), 10_000)).toBeNull();
  });
  it('workflow code that fails task after task: said with the command that shows why', () => {
    const stuck = stuckRun(running({ pendingWorkflowTask: { state: 2, attempt: 4, scheduledTime: at(60_000) } }), now.getTime(), 10_000)!;
    expect(stuckStatus('RollingUpgrade', recorded, stuck, run, now.getTime()).message).toBe(
      'RollingUpgrade cannot go on: its workflow code failed 4 times on the workers at "pod 1 is next: pod 2 has been Ready for less than 30s" (an operator version that cannot run it?); see temporal workflow describe --workflow-id queencluster/queen/queen',
    );
  });
});
