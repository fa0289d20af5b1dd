// Whether an upgrade's new version works: a crash loop on it, a restarted pod that is not Ready
// and live by the progress deadline, and what a canary is checked for during its soak.
import { describe, expect, it } from 'vitest';
import type { Observation } from '../../plan/observation.ts';
import { canaryProblem, canaryUp, newVersionFailure, readyAndLive, timeLeftText } from '../../plan/progress.ts';
import { cluster, member, pod, setMember, T0 } from './fixture.ts';

/** Pod 2 moved to the new template (the others are on the old one). */
function moved(): Observation {
  const obs = cluster(3, 3, 1);
  for (const p of obs.pods) p.hash = p.ordinal === 2 ? 'new' : 'old';
  return obs;
}
const check = (obs: Observation, since = T0 - 5_000, deadlineMs = 600_000) =>
  newVersionFailure({ obs, version: '2.6.1', watch: { ordinal: 2, since }, deadlineMs });

describe('a new version fails', () => {
  it('not while the moved pod comes up within the deadline', () => {
    const obs = moved();
    Object.assign(pod(obs, 2), { ready: false, running: false });
    expect(check(obs)).toBeNull();
    expect(readyAndLive(obs, 2)).toBe(false);
  });

  it('when a pod on it crash-loops, at once', () => {
    const obs = moved();
    Object.assign(pod(obs, 2), { ready: false, running: false, waitingReason: 'CrashLoopBackOff', lastExitCode: 1, restarts: 3 });
    expect(check(obs)).toBe('pod 2 crash-loops on 2.6.1: its container exited with code 1 (3 restarts)');
    // A crash loop on the old template is not the new version's.
    pod(obs, 2).hash = 'old';
    expect(check(obs)).toBeNull();
  });

  it('when the moved pod is not Ready and live once the deadline has passed', () => {
    const obs = moved();
    pod(obs, 2).ready = false;
    expect(check(obs, T0 - 60_000, 30_000)).toBe('pod 2 did not become Ready and live on 2.6.1 within 30s: pod 2 is not Ready');
    pod(obs, 2).ready = true;
    setMember(obs, { ...member(3, true, 0), live: false });
    expect(check(obs, T0 - 60_000, 30_000)).toBe('pod 2 did not become Ready and live on 2.6.1 within 30s: the leader has not heard from node 3');
    setMember(obs, member(3, true, 0));
    expect(check(obs, T0 - 60_000, 30_000)).toBeNull();
  });

  it('not while no scheduler places the moved pod, and its deadline runs from when one did', () => {
    const obs = moved();
    Object.assign(pod(obs, 2), { ready: false, running: false, node: null, notPlaced: 'no scheduler has placed it for 10m0s' });
    expect(check(obs, T0 - 900_000, 600_000)).toBeNull();
    // Placed 20 s ago, after 15 minutes without a scheduler: not yet a verdict on the version.
    Object.assign(pod(obs, 2), { node: 'tb-node-1', notPlaced: null, scheduledAt: T0 - 20_000 });
    expect(check(obs, T0 - 900_000, 600_000)).toBeNull();
    pod(obs, 2).scheduledAt = T0 - 700_000;
    expect(check(obs, T0 - 900_000, 600_000)).toMatch(/^pod 2 did not become Ready and live on 2\.6\.1 within 10m0s/);
  });

  it('not for a pod that was not watched, or that runs another template (a retarget)', () => {
    const obs = moved();
    pod(obs, 2).ready = false;
    expect(newVersionFailure({ obs, version: '2.6.1', watch: null, deadlineMs: 1000 })).toBeNull();
    pod(obs, 2).hash = 'older';
    expect(check(obs, T0 - 60_000, 30_000)).toBeNull();
  });
});

describe('a canary', () => {
  const start = { ordinal: 2, uid: 'uid-2', restarts: 0 };
  it('is up once Ready, live and caught up on the new template', () => {
    const obs = moved();
    expect(canaryUp(obs, 2, 100)).toBe(true);
    setMember(obs, member(3, true, 500));
    expect(canaryUp(obs, 2, 100)).toBe(false);
  });
  it('fails at once when it restarts, is replaced or is not Ready; twice in a row when it is behind or not heard from', () => {
    const obs = moved();
    expect(canaryProblem(obs, start, 100)).toBeNull();
    expect(canaryProblem(obs, { ...start, uid: 'other' }, 100)).toEqual({ reason: 'pod 2 was replaced', fatal: true });
    Object.assign(pod(obs, 2), { restarts: 1, lastExitCode: 1 });
    expect(canaryProblem(obs, start, 100)).toEqual({ reason: 'pod 2 restarted: its container exited with code 1 (1 restart)', fatal: true });
    Object.assign(pod(obs, 2), { restarts: 0, ready: false });
    expect(canaryProblem(obs, start, 100)).toEqual({ reason: 'pod 2 is not Ready', fatal: true });
    pod(obs, 2).ready = true;
    setMember(obs, member(3, true, 500));
    expect(canaryProblem(obs, start, 100)).toEqual({ reason: 'node 3 is behind the leader (500 entries behind)', fatal: false });
    setMember(obs, { ...member(3, true, 0), live: false });
    expect(canaryProblem(obs, start, 100)).toEqual({ reason: 'the leader has not heard from node 3', fatal: false });
  });
  it('shows the time left in steps of 5 s', () => {
    expect(timeLeftText(60_000)).toBe('1m0s');
    expect(timeLeftText(41_000)).toBe('45s');
    expect(timeLeftText(100)).toBe('5s');
    expect(timeLeftText(-3)).toBe('5s');
  });
});
