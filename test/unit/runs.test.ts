// What the watcher makes of runs it did not see end (issue 8, items 3 and 9): a run terminated
// from outside, timed out or failed unseen becomes status.lastOperation in words, with who ended
// it and how to resume; an operation no worker takes up names its task queue.
import type { WorkflowExecutionDescription } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import type { OperationStatus } from '../../crd/schema.ts';
import { endedOutside, noWorkerStatus, waitingForWorker, type RunEnd } from '../../watcher/runs.ts';

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
