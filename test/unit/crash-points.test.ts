// The chaos matrix's crash points (worker.ts crashPoints, QUEEN_CRASH_AT): the list is parsed or
// refused as a whole; a point kills the process (SIGKILL) only after its activity's side effects
// returned, only on the first attempt, and once per pod (its marker file says it fired), so the
// operator that starts again goes on instead of dying at the same step forever.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { crashPoints } from '../../worker.ts';

type Info = { workflowType: string; activityId: string; attempt: number; activityType: string };
const PENDING = Symbol('pending');

let markers: string;
let kill: ReturnType<typeof vi.spyOn>;
beforeEach(() => {
  markers = mkdtempSync(join(tmpdir(), 'queen-crash-markers-'));
  // The crash point's SIGKILL would end this test process: it is recorded instead.
  kill = vi.spyOn(process, 'kill').mockImplementation(() => true);
  vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
});
afterEach(() => {
  vi.restoreAllMocks();
  rmSync(markers, { recursive: true, force: true });
});

/** Runs one activity attempt through the interceptor: its result, or PENDING when it never returns (the process was killed). */
async function attempt(spec: string, info: Partial<Info>, next: () => Promise<unknown> = async () => 'done'): Promise<unknown> {
  const factory = crashPoints({ QUEEN_CRASH_AT: spec, QUEEN_CRASH_MARKER_DIR: markers });
  if (!factory) throw new Error('no crash points');
  const full: Info = { workflowType: 'rollingUpgrade', activityId: '7', attempt: 1, activityType: 'restartPod', ...info };
  const interceptors = factory({ info: full } as never);
  const run = interceptors.inbound!.execute!({ args: [], headers: {} } as never, next as never);
  return Promise.race([run, new Promise((r) => setTimeout(() => r(PENDING), 200))]);
}

describe('crashPoints (QUEEN_CRASH_AT)', () => {
  it('is off unless QUEEN_CRASH_AT names a point', () => {
    expect(crashPoints({})).toBeNull();
    expect(crashPoints({ QUEEN_CRASH_AT: '' })).toBeNull();
    expect(crashPoints({ QUEEN_CRASH_AT: '   ' })).toBeNull();
  });

  it('refuses a list with a point that is not <workflow>:<activity id>', () => {
    for (const bad of ['rollingUpgrade', 'rollingUpgrade:', ':7', 'rollingUpgrade:seven', 'rollingUpgrade:7:1', 'rollingUpgrade:7,scaleVoters', 'rolling-upgrade:7']) {
      expect(() => crashPoints({ QUEEN_CRASH_AT: bad }), bad).toThrow(/^QUEEN_CRASH_AT: ".*" is not <workflow>:<activity id>$/);
    }
    expect(crashPoints({ QUEEN_CRASH_AT: ' rollingUpgrade:7 , scaleVoters:12 ' })).not.toBeNull();
  });

  it('kills the process after the step did its work, before its result goes back', async () => {
    const order: string[] = [];
    kill.mockImplementation(((pid: number, signal: string) => void order.push(`kill ${pid} ${signal}`)) as never);
    const r = await attempt('rollingUpgrade:7', {}, async () => {
      order.push('side effect');
      return 'done';
    });
    expect(r).toBe(PENDING);
    expect(order).toEqual(['side effect', `kill ${process.pid} SIGKILL`]);
    expect(readdirSync(markers)).toEqual(['queen-crashed-rollingUpgrade-7']);
  });

  it('fires once per pod: with its marker there, the same step runs through', async () => {
    expect(await attempt('rollingUpgrade:7', {})).toBe(PENDING);
    expect(kill).toHaveBeenCalledTimes(1);
    // The container started again (same emptyDir), a new run of the workflow reaches the same step.
    expect(await attempt('rollingUpgrade:7', {})).toBe('done');
    expect(kill).toHaveBeenCalledTimes(1);
  });

  it('fires only on the first attempt: a retry of the step runs through and leaves no marker', async () => {
    expect(await attempt('rollingUpgrade:7', { attempt: 2 })).toBe('done');
    expect(kill).not.toHaveBeenCalled();
    expect(readdirSync(markers)).toEqual([]);
  });

  it('fires only at its own workflow and activity id', async () => {
    expect(await attempt('rollingUpgrade:7', { activityId: '8' })).toBe('done');
    expect(await attempt('rollingUpgrade:7', { activityId: '17' })).toBe('done');
    expect(await attempt('rollingUpgrade:7', { workflowType: 'scaleVoters' })).toBe('done');
    expect(kill).not.toHaveBeenCalled();
  });

  it('does not fire when the step failed (no side effect to survive): the error goes back', async () => {
    await expect(attempt('rollingUpgrade:7', {}, async () => Promise.reject(new Error('refused')))).rejects.toThrow('refused');
    expect(kill).not.toHaveBeenCalled();
    expect(existsSync(join(markers, 'queen-crashed-rollingUpgrade-7'))).toBe(false);
  });

  it('each point of a list fires once', async () => {
    const spec = 'rollingUpgrade:7,scaleVoters:3';
    expect(await attempt(spec, {})).toBe(PENDING);
    expect(await attempt(spec, { workflowType: 'scaleVoters', activityId: '3', activityType: 'addLearner' })).toBe(PENDING);
    expect(await attempt(spec, {})).toBe('done');
    expect(await attempt(spec, { workflowType: 'scaleVoters', activityId: '3', activityType: 'addLearner' })).toBe('done');
    expect(kill).toHaveBeenCalledTimes(2);
    expect(readdirSync(markers).sort()).toEqual(['queen-crashed-rollingUpgrade-7', 'queen-crashed-scaleVoters-3']);
  });
});
