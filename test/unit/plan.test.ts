// The planning rules as table tests: the reference operator's scenarios (its section 6) for the
// rolling upgrade, the stop gate and the cluster's phase, and the gaps this project closes.
import { describe, expect, it } from 'vitest';
import { assess } from '../../plan/assess.ts';
import { drainAhead, stopGate, type GateOptions } from '../../plan/gates.ts';
import type { Observation } from '../../plan/observation.ts';
import { nextRestart } from '../../plan/restarts.ts';
import { answeringNodes, isStalled, stallMemoryFromStatus, trackStalls, type StallMemory } from '../../plan/stalls.ts';
import { cluster, member, pod, setMember, stalledSince, T0 } from './fixture.ts';

const OPTS: GateOptions = { minReadyMs: 30_000, stallAfterMs: 10_000, caughtUpEntries: 1000 };
const gate = (obs: Observation, target: number | null, memory: StallMemory = {}, opts = OPTS) => stopGate({ obs, memory, target, opts });
const phaseOf = (obs: Observation, memory: StallMemory = {}, formed = true) =>
  assess({ obs, memory, formed, probe: { ok: true }, stallAfterMs: 10_000, secretName: 'queen' });
const allOld = (obs: Observation) => obs.pods.forEach((p) => (p.hash = 'old'));

describe('a cluster at rest (S1)', () => {
  it.each([
    [3, 3, 2],
    [1, 1, 1],
    [5, 5, 4],
  ])('cluster(%i,%i,%i) needs nothing and is Ready', (pods, voters, leader) => {
    const obs = cluster(pods, voters, leader);
    expect(nextRestart(obs)).toBeNull();
    expect(gate(obs, null, {}, { ...OPTS, minReadyMs: 0 })).toBeNull();
    expect(phaseOf(obs)).toEqual({ phase: 'Ready', message: '' });
  });
});

describe('a cluster between two operations', () => {
  it('formed on one voter with pods for three: the pods whose nodes the next operation adds are not a fault', () => {
    // FormCluster of a standby from a seed ends on voters [1] and 3 pods; ScaleVoters starts next.
    const obs = cluster(3, 1, 1);
    obs.voters = 3;
    for (const o of [1, 2]) {
      pod(obs, o).ready = false;
      obs.health[o] = { ...obs.health[o]!, status: 503, healthy: false, role: 'learner', applied: 0, commit: 0 };
    }
    expect(phaseOf(obs)).toEqual({ phase: 'Ready', message: '' });
    // A voter's pod that is not Ready still is.
    pod(obs, 0).ready = false;
    expect(phaseOf(obs)).toMatchObject({ phase: 'Degraded', message: 'pod 0 is not Ready' });
  });
});

describe('a cluster that cannot be read (S2)', () => {
  it('without a leader view and never formed, it is Forming', () => {
    const obs = cluster(3, 3, 1);
    obs.membership = null;
    expect(phaseOf(obs, {}, false)).toMatchObject({ phase: 'Forming', message: 'waiting for the pods to start and elect a leader' });
  });
  it('without a leader view once formed, it is Degraded: an election, or a lost majority', () => {
    const obs = cluster(3, 3, 1);
    obs.membership = null;
    expect(phaseOf(obs).phase).toBe('Degraded');
    expect(phaseOf(obs).message).toContain('lost its majority');
  });
  it('a leader view without a leader holds every stop back', () => {
    const obs = cluster(3, 3, 1);
    allOld(obs);
    obs.membership!.leader = null;
    expect(gate(obs, 1)?.reason).toContain('an election is under way');
  });
  it('an apply failure on any pod is Blocked and restarts nothing', () => {
    const obs = cluster(3, 3, 1);
    pod(obs, 1).hash = 'old';
    obs.health[2]!.applyFailure = { index: 9 };
    expect(gate(obs, 1)).toEqual({ gate: 'apply-running', reason: 'apply stopped on pod 2: this needs a person, see the recovery guide' });
    expect(phaseOf(obs)).toMatchObject({ phase: 'Blocked', message: expect.stringContaining('apply stopped on pod 2') });
  });
  it('a membership change in flight holds every stop back', () => {
    const obs = cluster(3, 3, 1);
    pod(obs, 1).hash = 'old';
    obs.membership!.changeInFlight = true;
    expect(gate(obs, 1)).toEqual({ gate: 'no-change-in-flight', reason: 'a membership change is in flight' });
  });
});

describe('a rolling upgrade restarts one pod at a time, the leader last (S6)', () => {
  it('walks 1, 0, then the leader 2, waiting on minReadySeconds between pods', () => {
    const obs = cluster(3, 3, 3);
    allOld(obs);
    const first = nextRestart(obs);
    expect(first).toMatchObject({ ordinal: 1, why: 'follower' });
    expect(gate(obs, 1)).toBeNull();

    pod(obs, 1).hash = 'new';
    pod(obs, 1).readySince = T0 - 10_000;
    expect(nextRestart(obs)).toMatchObject({ ordinal: 0 });
    // It opens by time alone once pod 1 has been Ready 30 s: the wait looks again then.
    expect(gate(obs, 0)).toEqual({ gate: 'pod-ready-for-min-ready-seconds', reason: 'pod 1 has been Ready for less than 30s', liftsAt: T0 + 20_000 });

    pod(obs, 1).readySince = T0 - 31_000;
    expect(gate(obs, 0)).toBeNull();

    pod(obs, 0).hash = 'new';
    expect(nextRestart(obs)).toMatchObject({ ordinal: 2, why: 'leader' });
    expect(gate(obs, 2)).toBeNull();

    pod(obs, 2).hash = 'new';
    expect(nextRestart(obs)).toBeNull();
  });

  it('the minimum Ready time lifts when the last other voter has been Ready that long', () => {
    const obs = cluster(5, 5, 5);
    pod(obs, 1).readySince = T0 - 25_000;
    pod(obs, 2).readySince = T0 - 5_000;
    pod(obs, 3).readySince = T0 - 40_000;
    expect(gate(obs, 0)).toMatchObject({ gate: 'pod-ready-for-min-ready-seconds', liftsAt: T0 + 25_000 });
    // Ready with no Ready time to count from: nothing says when it lifts, so the wait polls.
    pod(obs, 3).readySince = null;
    expect(gate(obs, 0)?.gate).toBe('pod-ready-for-min-ready-seconds');
    expect(gate(obs, 0)?.liftsAt).toBeUndefined();
  });

  it('with five voters the order is 3, 2, 1, 0 and the leader 4 last', () => {
    const obs = cluster(5, 5, 5);
    allOld(obs);
    const order: number[] = [];
    for (let pick = nextRestart(obs); pick; pick = nextRestart(obs)) {
      order.push(pick.ordinal);
      pod(obs, pick.ordinal).hash = 'new';
    }
    expect(order).toEqual([3, 2, 1, 0, 4]);
  });

  it('one voter: its only pod is restarted, once', () => {
    const obs = cluster(1, 1, 1);
    allOld(obs);
    expect(nextRestart(obs)).toMatchObject({ ordinal: 0, why: 'leader' });
    expect(gate(obs, 0)).toBeNull();
  });

  it('a pod already terminating is not picked again', () => {
    const obs = cluster(3, 3, 3);
    allOld(obs);
    pod(obs, 1).terminating = true;
    expect(nextRestart(obs)).toMatchObject({ ordinal: 0 });
  });
});

describe('no pod is stopped while another voter is not in place (S7)', () => {
  const setup = () => {
    const obs = cluster(3, 3, 3);
    pod(obs, 0).hash = 'old';
    pod(obs, 1).hash = 'old';
    expect(nextRestart(obs)?.ordinal).toBe(1);
    return obs;
  };
  it.each<[string, (obs: Observation) => StallMemory | void, string, string]>([
    ['pod 2 not Ready', (o) => void (pod(o, 2).ready = false), 'pod-ready', 'pod 2 is not Ready'],
    ['node 1 not live', (o) => setMember(o, { ...member(1, true, 0), live: false }), 'voter-live', 'the leader has not heard from node 1'],
    ['node 3 far behind', (o) => setMember(o, member(3, true, 50_000)), 'voter-caught-up', 'node 3 is behind the leader (50000 entries behind)'],
    [
      'node 1 behind and not moving',
      (o) => {
        setMember(o, member(1, true, 334));
        return stalledSince(o, 1, T0 - 60_000);
      },
      'voter-not-stalled',
      'node 1 is behind the leader and does not catch up (334 entries behind): if its volume was wiped or put back from a copy, it has to be replaced',
    ],
    ['pod 2 terminating', (o) => void (pod(o, 2).terminating = true), 'pod-running', 'pod 2 is not running'],
    ['pod 0 missing', (o) => void (o.pods = o.pods.filter((p) => p.ordinal !== 0)), 'pod-running', 'pod 0 is not running'],
  ])('%s', (_name, change, gateName, reason) => {
    const obs = setup();
    const memory = change(obs) ?? {};
    expect(gate(obs, 1, memory)).toEqual({ gate: gateName, reason });
  });

  it('the target itself may be down: it is the one being restarted', () => {
    const obs = setup();
    pod(obs, 1).ready = false;
    setMember(obs, { ...member(2, true, null), live: false });
    expect(gate(obs, 1)).toBeNull();
  });

  it('a Ready time in the future (clock skew) is a wait, never a negative one', () => {
    const obs = setup();
    pod(obs, 2).readySince = T0 + 5_000;
    expect(gate(obs, 1)?.reason).toBe('pod 2 has been Ready for less than 30s');
  });
});

describe('a voter that does not catch up holds every restart, its own included (G4)', () => {
  it('is not restarted when it is the next pod of the upgrade', () => {
    const obs = cluster(3, 3, 3);
    allOld(obs);
    setMember(obs, member(2, true, 72));
    const memory = stalledSince(obs, 2, T0 - 15_000);
    expect(nextRestart(obs)?.ordinal).toBe(1);
    expect(gate(obs, 1, memory)?.reason).toBe(
      'node 2 is behind the leader and does not catch up (72 entries behind): if its volume was wiped or put back from a copy, it has to be replaced',
    );
  });
  it('is not stalled yet before the threshold: only behind by a little, which the gate allows', () => {
    const obs = cluster(3, 3, 3);
    allOld(obs);
    setMember(obs, member(1, true, 72));
    expect(gate(obs, 1, stalledSince(obs, 1, T0 - 5_000))).toBeNull();
    expect(gate(obs, 1, stalledSince(obs, 1, T0 - 5_000), { ...OPTS, caughtUpEntries: 10 })?.reason).toBe('node 1 is behind the leader (72 entries behind)');
  });
});

describe('stall tracking (G12)', () => {
  it('keeps the time while matched does not move, and starts again when it moves', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, member(2, true, 50));
    let memory = trackStalls({}, obs.membership, T0 - 20_000);
    memory = trackStalls(memory, obs.membership, T0);
    expect(isStalled(obs, memory, 2, 10_000)).toBe(true);
    setMember(obs, member(2, true, 40));
    memory = trackStalls(memory, obs.membership, T0);
    expect(isStalled(obs, memory, 2, 10_000)).toBe(false);
  });
  it('a node receiving a snapshot (matched unknown) is not stalled', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, member(2, true, null));
    const memory = trackStalls({}, obs.membership, T0 - 60_000);
    expect(isStalled(obs, memory, 2, 10_000)).toBe(false);
  });
  it('a node that just restarted with exit code 75 to load a snapshot is not stalled', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, member(2, true, 300));
    Object.assign(pod(obs, 1), { lastExitCode: 75, lastExitAt: T0 - 2_000 });
    expect(isStalled(obs, stalledSince(obs, 2, T0 - 60_000), 2, 10_000)).toBe(false);
    pod(obs, 1).lastExitAt = T0 - 30_000;
    expect(isStalled(obs, stalledSince(obs, 2, T0 - 60_000), 2, 10_000)).toBe(true);
  });
  it('a node whose pod is down is not stalled but not running', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, { ...member(2, true, 300), live: false });
    pod(obs, 1).running = false;
    expect(isStalled(obs, stalledSince(obs, 2, T0 - 60_000), 2, 10_000)).toBe(false);
  });
  it('a node whose broker does not answer yet (it replays its store at boot) is not stalled, and its clock starts when it answers (issue 12)', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, member(2, true, 300));
    const booting = { ...obs, health: { ...obs.health } };
    delete booting.health[1];
    let memory = trackStalls({}, booting.membership, T0 - 60_000, answeringNodes(booting));
    memory = trackStalls(memory, booting.membership, T0 - 1_000, answeringNodes(booting));
    // Its pod runs, the leader's matched for it has not moved for a minute: still not stalled.
    expect(isStalled(booting, memory, 2, 10_000)).toBe(false);
    // It answers now: the minute without an answer does not count.
    memory = trackStalls(memory, obs.membership, T0, answeringNodes(obs));
    expect(isStalled(obs, memory, 2, 10_000)).toBe(false);
    memory = trackStalls(memory, obs.membership, T0 + 11_000, answeringNodes(obs));
    expect(isStalled({ ...obs, at: T0 + 11_000 }, memory, 2, 10_000)).toBe(true);
  });
  it('survives an operator restart through status.members', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, member(2, true, 72));
    const memory = stallMemoryFromStatus([{ nodeId: 2, matched: 4928, behindSince: new Date(T0 - 60_000).toISOString() }], T0);
    expect(isStalled(obs, trackStalls(memory, obs.membership, T0), 2, 10_000)).toBe(true);
  });
});

describe('a broken pod on an old template is restarted first (S8)', () => {
  it('goes first whatever its ordinal, and the gate does not wait for it', () => {
    const obs = cluster(3, 3, 3);
    allOld(obs);
    pod(obs, 0).ready = false;
    setMember(obs, { ...member(1, true, 0), live: false });
    expect(nextRestart(obs)).toMatchObject({ ordinal: 0, why: 'not-ready' });
    expect(gate(obs, 0)).toBeNull();
  });
  it('with two broken pods, the higher one is picked and the other holds it back', () => {
    const obs = cluster(3, 3, 3);
    allOld(obs);
    pod(obs, 0).ready = false;
    pod(obs, 1).ready = false;
    expect(nextRestart(obs)).toMatchObject({ ordinal: 1, why: 'not-ready' });
    expect(gate(obs, 1)?.reason).toBe('pod 0 is not Ready');
  });
  it('a broken leader pod goes first too', () => {
    const obs = cluster(3, 3, 3);
    allOld(obs);
    pod(obs, 2).ready = false;
    expect(nextRestart(obs)).toMatchObject({ ordinal: 2, why: 'not-ready' });
  });
});

describe('a pod down on the current template is reported, not touched (S9)', () => {
  it('is Degraded with the reason', () => {
    const obs = cluster(3, 3, 3);
    pod(obs, 1).ready = false;
    expect(nextRestart(obs)).toBeNull();
    expect(phaseOf(obs)).toMatchObject({ phase: 'Degraded', message: 'pod 1 is not Ready' });
  });
  it('a pod Ready a moment ago does not make the cluster Degraded', () => {
    const obs = cluster(3, 3, 3);
    pod(obs, 1).readySince = T0 - 2_000;
    expect(phaseOf(obs).phase).toBe('Ready');
  });
  it('a stalled voter is Degraded: it has to be replaced', () => {
    const obs = cluster(3, 3, 3);
    setMember(obs, member(2, true, 700));
    expect(phaseOf(obs, stalledSince(obs, 2, T0 - 60_000))).toMatchObject({ phase: 'Degraded', message: expect.stringContaining('has to be replaced') });
  });
  it('a stalled voter whose pod is not Ready is told as stalled: that says what to do', () => {
    const obs = cluster(3, 3, 3);
    setMember(obs, member(2, true, 1700));
    pod(obs, 1).ready = false;
    expect(phaseOf(obs, stalledSince(obs, 2, T0 - 60_000)).message).toBe(
      'node 2 is behind the leader and does not catch up (1700 entries behind): if its volume was wiped or put back from a copy, it has to be replaced',
    );
  });
  it('a write that does not commit is Degraded, never Ready (G2)', () => {
    const obs = cluster(3, 3, 3);
    const a = assess({ obs, memory: {}, formed: true, probe: { ok: false, error: 'the write probe through pod 0 got no answer within 5s' }, stallAfterMs: 10_000, secretName: 'queen' });
    expect(a).toMatchObject({ phase: 'Degraded', message: 'a write does not commit: the write probe through pod 0 got no answer within 5s' });
  });
});

describe('what the kubelet says is turned into a reason (G13, G17, G21)', () => {
  it('a missing Secret is Blocked with its name', () => {
    const obs = cluster(3, 3, 1);
    obs.membership = null;
    Object.assign(pod(obs, 0), { running: false, ready: false, waitingReason: 'CreateContainerConfigError', waitingMessage: 'secret "queen" not found' });
    expect(phaseOf(obs, {}, false)).toMatchObject({ phase: 'Blocked', message: expect.stringMatching(/^the Secret queen does not exist/) });
  });
  it('a Secret without the key is Blocked with the key', () => {
    const obs = cluster(3, 3, 1);
    obs.membership = null;
    Object.assign(pod(obs, 2), {
      running: false,
      waitingReason: 'CreateContainerConfigError',
      waitingMessage: "couldn't find key QUEEN_RAFT_TOKEN in Secret queen/queen",
    });
    expect(phaseOf(obs, {}, false).message).toBe('the Secret queen has no key QUEEN_RAFT_TOKEN: add it (pod 2 cannot start)');
  });
  it('a crash loop is Degraded with the exit code', () => {
    const obs = cluster(3, 3, 1);
    Object.assign(pod(obs, 1), { running: false, ready: false, waitingReason: 'CrashLoopBackOff', lastExitCode: 1, restarts: 4 });
    expect(phaseOf(obs).message).toBe('pod 1 is crash-looping: its container exited with code 1 (4 restarts)');
  });
});

describe('a node leaves the membership through the same gate as a pod stop (issue 8, item 4)', () => {
  const removal = (obs: Observation, target: number, memory: StallMemory) => stopGate({ obs, memory, target, opts: OPTS, removing: true });
  it('removing a healthy voter while another is stalled is held: the two left could not commit', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, member(2, true, 72));
    const memory = stalledSince(obs, 2, T0 - 60_000);
    expect(removal(obs, 2, memory)).toEqual({
      gate: 'voter-not-stalled',
      reason: 'node 2 is behind the leader and does not catch up (72 entries behind): if its volume was wiped or put back from a copy, it has to be replaced',
    });
  });
  it('the stalled voter itself may leave (it is the one being replaced), the others carrying the cluster', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, member(2, true, 72));
    pod(obs, 1).ready = false;
    const memory = stalledSince(obs, 2, T0 - 60_000);
    expect(removal(obs, 1, memory)).toBeNull();
    // A pod stop of that voter is still held: restarting it repairs nothing.
    expect(gate(obs, 1, memory)?.gate).toBe('voter-not-stalled');
  });
  it('another voter not Ready holds a removal as it holds a restart', () => {
    const obs = cluster(3, 3, 1);
    pod(obs, 1).ready = false;
    expect(removal(obs, 2, {})).toEqual({ gate: 'pod-ready', reason: 'pod 1 is not Ready' });
  });
});

describe('without its StatefulSet no pod is stopped: it would not come back (issue 8, item 1)', () => {
  it('the gate says the cluster has to be formed again', () => {
    const obs = cluster(3, 3, 1);
    obs.statefulSet = null;
    expect(gate(obs, 2)).toEqual({ gate: 'statefulset-present', reason: 'the StatefulSet queen is gone: the cluster has to be formed again' });
  });
});

describe('a pod whose image cannot be pulled (issue 12)', () => {
  it('holds the next restart with the image and the registry\'s cause, and shows as Degraded at rest', () => {
    const obs = cluster(3, 3, 1);
    allOld(obs);
    const p2 = pod(obs, 2);
    p2.hash = obs.wantedHash;
    p2.ready = false;
    p2.running = false;
    p2.readySince = null;
    p2.image = 'ghcr.io/queen-mq/queen:2.6.9';
    p2.waitingReason = 'ImagePullBackOff';
    p2.waitingMessage = 'Back-off pulling image "ghcr.io/queen-mq/queen:2.6.9": ErrImagePull: rpc error: code = NotFound desc = failed to resolve reference "ghcr.io/queen-mq/queen:2.6.9": not found';
    delete obs.health[2];
    expect(gate(obs, 1, {}, { ...OPTS, minReadyMs: 0 })).toEqual({ gate: 'image-pull', reason: 'pod 2 cannot pull its image ghcr.io/queen-mq/queen:2.6.9 (ImagePullBackOff: not found)' });
    expect(phaseOf(obs)).toEqual({ phase: 'Degraded', message: 'pod 2 cannot pull its image ghcr.io/queen-mq/queen:2.6.9 (ImagePullBackOff: not found)', reason: 'image-pull' });
    p2.waitingReason = 'ErrImagePull';
    p2.waitingMessage = 'failed to authorize: 401 Unauthorized';
    expect(phaseOf(obs).message).toBe('pod 2 cannot pull its image ghcr.io/queen-mq/queen:2.6.9 (ErrImagePull: access denied)');
  });
});

describe('the next pod drains in the last seconds of the minimum Ready wait', () => {
  const ahead = (obs: Observation, target: number, leadMs: number) => drainAhead({ obs, memory: {}, target, opts: OPTS }, leadMs);
  it('only when the minimum Ready time is all that holds it, and less than the lead is left', () => {
    const obs = cluster(3, 3, 3);
    allOld(obs);
    pod(obs, 1).hash = 'new';
    pod(obs, 1).readySince = T0 - 10_000;
    expect(ahead(obs, 0, 3500)).toBe(false);
    pod(obs, 1).readySince = T0 - 27_000;
    expect(ahead(obs, 0, 3500)).toBe(true);
    // Another gate would hold it once the wait is over: no drain ahead.
    setMember(obs, member(2, true, 5000));
    expect(ahead(obs, 0, 3500)).toBe(false);
  });
  it('not when the gate is open already (the restart drains it), nor when another gate holds', () => {
    const obs = cluster(3, 3, 3);
    allOld(obs);
    expect(ahead(obs, 1, 3500)).toBe(false);
    pod(obs, 2).ready = false;
    expect(ahead(obs, 1, 3500)).toBe(false);
  });
});
