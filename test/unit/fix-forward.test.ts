// A fix-forward (plan/fix-forward.ts) as table tests: a build that is not Ready on any pod, every
// broker live, caught up and committing, and a fixed build named. The Ready checks of the pods on
// the build being left are waived only while the pod to stop is not Ready and none of them is;
// every other gate holds as always, and the pods on the fixed build are held to the whole gate.
import { describe, expect, it } from 'vitest';
import { fixForward, fixForwardText } from '../../plan/fix-forward.ts';
import { stopGate, writeGate, type GateHold, type GateOptions } from '../../plan/gates.ts';
import type { Observation } from '../../plan/observation.ts';
import { nextRestart } from '../../plan/restarts.ts';
import type { StallMemory } from '../../plan/stalls.ts';
import { cluster, member, pod, setMember, stalledSince, T0 } from './fixture.ts';

const OPTS: GateOptions = { minReadyMs: 30_000, stallAfterMs: 10_000, caughtUpEntries: 1000 };
const gate = (obs: Observation, target: number, memory: StallMemory = {}, removing = false) => stopGate({ obs, memory, target, opts: OPTS, removing });

/**
 * Three voters, node 1 (pod 0) leads; the StatefulSet's template is the fixed build ('new'), every
 * pod still runs the broken one ('old') and none is Ready: /health answers 503, while the leader
 * hears every node and sees it caught up.
 */
function broken(): Observation {
  const obs = cluster(3, 3, 1);
  for (const p of obs.pods) Object.assign(p, { hash: 'old', ready: false, readySince: null });
  for (const h of Object.values(obs.health)) Object.assign(h, { status: 503, healthy: false });
  return obs;
}

/** Pod `o` restarted onto the fixed build, Ready for `readyMs`. */
function fixed(obs: Observation, o: number, readyMs = 3600_000) {
  Object.assign(pod(obs, o), { hash: 'new', uid: `uid-${o}'`, ready: true, readySince: T0 - readyMs });
}

const WHY = 'the version it leaves is Ready on none of its pods, while the voters that stay are live, caught up and commit writes';

describe('a fix-forward restarts a pod although the others are not Ready', () => {
  it('every pod of the broken build not Ready: the first one goes, and says why', () => {
    const obs = broken();
    expect(nextRestart(obs)).toMatchObject({ ordinal: 2, why: 'not-ready' });
    expect(gate(obs, 2)).toBeNull();
    const f = fixForward(obs, 2);
    expect(f).toEqual({ target: 2, waived: [0, 1], noneReady: true });
    expect(fixForwardText(f!)).toBe(`although no pod is Ready: ${WHY}; pod 2 serves no client, so stopping it cuts none off`);
  });

  it('one pod on the fixed build, Ready for minReadySeconds: the next broken pod goes; only the broken ones are waived', () => {
    const obs = broken();
    fixed(obs, 2);
    expect(nextRestart(obs)).toMatchObject({ ordinal: 1, why: 'not-ready' });
    expect(gate(obs, 1)).toBeNull();
    const f = fixForward(obs, 1);
    expect(f).toEqual({ target: 1, waived: [0], noneReady: false });
    expect(fixForwardText(f!)).toBe(`although pod 0 is not Ready: ${WHY}; pod 1 serves no client, so stopping it cuts none off`);
  });

  it('the leader\'s pod goes last among the broken ones: leadership moves once', () => {
    const obs = broken();
    obs.membership!.leader = 3;
    expect(nextRestart(obs)).toMatchObject({ ordinal: 1, why: 'not-ready' });
    fixed(obs, 1);
    expect(nextRestart(obs)).toMatchObject({ ordinal: 0, why: 'not-ready' });
    expect(gate(obs, 0)).toBeNull();
    expect(fixForward(obs, 0)).toEqual({ target: 0, waived: [2], noneReady: false });
    fixed(obs, 0);
    expect(nextRestart(obs)).toMatchObject({ ordinal: 2, why: 'not-ready' });
    expect(fixForward(obs, 2)).toBeNull();
  });

  it('the last broken pod, the leader, needs no waiver: the pods on the fixed build are Ready', () => {
    const obs = broken();
    fixed(obs, 2);
    fixed(obs, 1);
    expect(nextRestart(obs)).toMatchObject({ ordinal: 0 });
    expect(fixForward(obs, 0)).toBeNull();
    expect(gate(obs, 0)).toBeNull();
  });
});

describe('where it holds all the same', () => {
  // [case, what changes, the pod to stop, the gate that holds, its reason, whether the waiver applies at all]
  it.each<[string, (obs: Observation) => StallMemory | void, number, GateHold['gate'], unknown, boolean]>([
    // The waiver does not apply: the Ready checks hold as always.
    ['a pod of the broken build is Ready', (o) => void Object.assign(pod(o, 0), { ready: true, readySince: T0 - 3600_000 }), 2, 'pod-ready', 'pod 1 is not Ready', false],
    ['the pod to stop is Ready', (o) => void Object.assign(pod(o, 2), { ready: true, readySince: T0 - 3600_000 }), 2, 'pod-ready', 'pod 0 is not Ready', false],
    [
      'the pod to stop is already on the StatefulSet\'s template (its restart moves it nowhere)',
      (o) => void (pod(o, 2).hash = 'new'),
      2,
      'pod-ready',
      'pod 0 is not Ready',
      false,
    ],
    ['the StatefulSet\'s template is the broken build\'s (the fix is not applied yet)', (o) => void (o.statefulSet!.templateHash = 'old'), 2, 'pod-ready', 'pod 0 is not Ready', false],
    // It applies, and another gate holds.
    ['another voter not live', (o) => setMember(o, { ...member(2, true, 0), live: false }), 2, 'voter-live', 'the leader has not heard from node 2', true],
    ['another voter behind', (o) => setMember(o, member(2, true, 5000)), 2, 'voter-caught-up', 'node 2 is behind the leader (5000 entries behind)', true],
    [
      'another voter behind and not moving',
      (o) => {
        setMember(o, member(2, true, 334));
        return stalledSince(o, 2, T0 - 60_000);
      },
      2,
      'voter-not-stalled',
      'node 2 is behind the leader and does not catch up (334 entries behind): if its volume was wiped or put back from a copy, it has to be replaced',
      true,
    ],
    ['another voter\'s pod not running', (o) => void (pod(o, 1).running = false), 2, 'pod-running', 'pod 1 is not running', true],
    ['another voter\'s pod going down', (o) => void (pod(o, 1).terminating = true), 2, 'pod-running', 'pod 1 is not running', true],
    ['a membership change in flight', (o) => void (o.membership!.changeInFlight = true), 2, 'no-change-in-flight', 'a membership change is in flight', true],
    ['no leader', (o) => void (o.membership!.leader = null), 2, 'leader-known', expect.stringContaining('an election is under way'), true],
    // The fixed build proves itself: its pods are held to the whole gate.
    [
      'the pod on the fixed build not Ready',
      (o) => {
        fixed(o, 2);
        Object.assign(pod(o, 2), { ready: false, readySince: null });
      },
      1,
      'pod-ready',
      'pod 2 is not Ready',
      true,
    ],
    ['the pod on the fixed build Ready for less than minReadySeconds', (o) => fixed(o, 2, 10_000), 1, 'pod-ready-for-min-ready-seconds', 'pod 2 has been Ready for less than 30s', true],
  ])('%s', (_name, change, target, gateName, reason, applies) => {
    const obs = broken();
    const memory = change(obs) ?? {};
    expect(gate(obs, target, memory)).toMatchObject({ gate: gateName, reason });
    expect(fixForward(obs, target) !== null).toBe(applies);
  });

  it('a write that does not commit through a pod that stays holds the stop the waiver lets through', () => {
    const obs = broken();
    expect(gate(obs, 2)).toBeNull();
    const probe = { ok: false, error: 'the write probe through pod 0 answered 503: no quorum' };
    expect(writeGate(probe)).toEqual({ gate: 'write-commits', reason: 'a write does not commit: the write probe through pod 0 answered 503: no quorum' });
    expect(writeGate({ ok: true })).toBeNull();
  });

  it('a node that leaves the membership is no fix-forward: the Ready checks hold', () => {
    const obs = broken();
    expect(fixForward(obs, 2, true)).toBeNull();
    expect(gate(obs, 2, {}, true)).toEqual({ gate: 'pod-ready', reason: 'pod 0 is not Ready' });
  });

  it('a cluster at rest (no pod to stop) is never waived', () => {
    expect(fixForward(broken(), null)).toBeNull();
    expect(stopGate({ obs: broken(), memory: {}, target: null, opts: OPTS })).toEqual({ gate: 'pod-ready', reason: 'pod 0 is not Ready' });
  });
});
