// Telling the activity attempts of a gone process of this pod from those of live processes: the
// watcher of a restarted operator tries the former again at once instead of waiting out their
// heartbeat timeout.
import type { WorkflowExecutionDescription } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { formatIdentity, heldByGoneProcess, parseIdentity, type ProcessIdentity } from '../../identity.ts';
import { lostAttempts } from '../../watcher/runs.ts';

const mine: ProcessIdentity = { pid: 1, host: 'queen-operator-7d9f-x2k4q', token: 'a1b2c3d4' };
const alive = (pids: number[]) => (pid: number) => pids.includes(pid);

describe('the process identity', () => {
  it('reads back what it writes; an identity of another form is not one of ours', () => {
    expect(parseIdentity(formatIdentity(mine))).toEqual(mine);
    expect(parseIdentity('1@queen-operator-7d9f-x2k4q')).toBeNull();
    expect(parseIdentity('temporal-cli:alice@laptop')).toBeNull();
  });
});

describe('an attempt held by a gone process of this pod (heldByGoneProcess)', () => {
  it('the container restarted: PID 1 again, another token: gone', () => {
    expect(heldByGoneProcess('1@queen-operator-7d9f-x2k4q/0badf00d', mine, alive([1]))).toBe(true);
  });
  it('another pid of this host that no longer runs: gone', () => {
    expect(heldByGoneProcess('4711@queen-operator-7d9f-x2k4q/0badf00d', mine, alive([1]))).toBe(true);
  });
  it('not gone: this process, a pid of this host that runs, another host (alive or cut off), or an identity not ours', () => {
    expect(heldByGoneProcess(formatIdentity(mine), mine, alive([1]))).toBe(false);
    expect(heldByGoneProcess('4711@queen-operator-7d9f-x2k4q/0badf00d', mine, alive([1, 4711]))).toBe(false);
    expect(heldByGoneProcess('1@queen-operator-7d9f-99zzz/0badf00d', mine, alive([1]))).toBe(false);
    expect(heldByGoneProcess('1@queen-operator-7d9f-x2k4q', mine, alive([1]))).toBe(false);
    expect(heldByGoneProcess(null, mine, alive([1]))).toBe(false);
  });
});

describe('the attempts of a run to try again (lostAttempts)', () => {
  const run = (status: string, pendingActivities: unknown[]) => ({ status: { name: status }, raw: { pendingActivities } }) as unknown as WorkflowExecutionDescription;
  const gone = (identity: string) => heldByGoneProcess(identity, mine, alive([1]));
  it('started attempts of a gone process only: not one scheduled (waiting for a worker) nor one of a live process', () => {
    const d = run('RUNNING', [
      { activityId: '3', activityType: { name: 'observeClusterStatus' }, state: 2, attempt: 4, lastWorkerIdentity: '1@queen-operator-7d9f-x2k4q/0badf00d' },
      { activityId: '4', activityType: { name: 'awaitVoterStep' }, state: 1, attempt: 2, lastWorkerIdentity: '1@queen-operator-7d9f-x2k4q/0badf00d' },
      { activityId: '5', activityType: { name: 'restartPod' }, state: 2, attempt: 1, lastWorkerIdentity: '1@queen-operator-7d9f-99zzz/0badf00d' },
    ]);
    expect(lostAttempts(d, gone)).toEqual([{ activityId: '3', activityType: 'observeClusterStatus', attempt: 4, identity: '1@queen-operator-7d9f-x2k4q/0badf00d' }]);
  });
  it('nothing of a run that is no longer running', () => {
    expect(lostAttempts(run('COMPLETED', [{ activityId: '3', state: 2, lastWorkerIdentity: '1@queen-operator-7d9f-x2k4q/0badf00d' }]), gone)).toEqual([]);
  });
});
