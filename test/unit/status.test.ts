// What status says: the VERSION column while pods run two versions, and the conditions tools
// read, checked for each phase against the kstatus rules Flux and Argo CD apply (observedGeneration
// first, then Reconciling and Stalled, then Ready).
import { describe, expect, it } from 'vitest';
import { PHASES, type Condition, type MemberStatus, type Phase } from '../../crd/schema.ts';
import { clusterConditions, commonVersion, comparableStatus, doorStatus, memberStatuses } from '../../activities/status.ts';
import { rolledOutGeneration, type ClusterView } from '../../plan/decide.ts';
import { cluster, T0 } from './fixture.ts';

describe('the VERSION column', () => {
  /** Pod `o` on the new template (its image 2.6.1); answering 2.6.1, or silent while it starts. */
  const moved = (obs: ReturnType<typeof cluster>, o: number, answers: boolean) => {
    obs.wantedHash = 'next';
    obs.pods[o]!.hash = 'next';
    obs.pods[o]!.image = 'ghcr.io/queen-mq/queen:2.6.1';
    if (answers) obs.health[o]!.version = '2.6.1';
    else delete obs.health[o];
  };
  it('one version on every pod: that version', () => {
    expect(commonVersion(cluster(3, 3, 1), 3)).toBe('2.6.0');
  });
  it('two versions: old to new, and how many pods run the new one', () => {
    const obs = cluster(3, 3, 1);
    moved(obs, 2, true);
    expect(commonVersion(obs, 3)).toBe('2.6.0→2.6.1 (1/3)');
    moved(obs, 1, true);
    expect(commonVersion(obs, 3)).toBe('2.6.0→2.6.1 (2/3)');
  });
  it('a pod silent while it restarts: still both, counting the pods that answer', () => {
    const obs = cluster(3, 3, 1);
    moved(obs, 2, true);
    moved(obs, 1, false);
    expect(commonVersion(obs, 3)).toBe('2.6.0→2.6.1 (1/3)');
  });
  it('the first restart of an upgrade, its new pod silent: both, none on the new one yet', () => {
    const obs = cluster(3, 3, 1);
    moved(obs, 2, false);
    expect(commonVersion(obs, 3)).toBe('2.6.0→2.6.1 (0/3)');
  });
  it('the first pod of an upgrade stopping, none on the new template yet: the new one is the spec\'s', () => {
    const obs = cluster(3, 3, 1);
    obs.wantedHash = 'next';
    obs.wantedVersion = '2.6.1';
    delete obs.health[2];
    expect(commonVersion(obs, 3)).toBe('2.6.0→2.6.1 (0/3)');
    // A change of the template alone (the same version): nothing to tell apart.
    obs.wantedVersion = '2.6.0';
    expect(commonVersion(obs, 3)).toBe('');
  });
  it('the last restart, the last old pod silent as it stops: both, named by its image', () => {
    const obs = cluster(3, 3, 1);
    moved(obs, 2, true);
    moved(obs, 1, true);
    delete obs.health[0];
    expect(commonVersion(obs, 3)).toBe('2.6.0→2.6.1 (2/3)');
  });
  it('one version but a pod silent, an image without a tag, or versions it cannot order: empty', () => {
    const obs = cluster(3, 3, 1);
    delete obs.health[0];
    expect(commonVersion(obs, 3)).toBe('');
    const digest = cluster(3, 3, 1);
    moved(digest, 2, false);
    digest.pods[2]!.image = 'ghcr.io/queen-mq/queen@sha256:' + 'a'.repeat(64);
    expect(commonVersion(digest, 3)).toBe('');
    const three = cluster(3, 3, 1);
    three.health[1]!.version = '2.6.1';
    three.health[2]!.version = '2.6.2';
    expect(commonVersion(three, 3)).toBe('');
  });
});

describe('the door in status', () => {
  it('each member says what its build reads; the cluster its catalogue version; the versions what their builds read', () => {
    const obs = cluster(3, 3, 1);
    for (const h of Object.values(obs.health)) Object.assign(h, { kinds: 6, clusterVersion: 6 });
    obs.health[2]!.kinds = null;
    obs.membership!.members.find((m) => m.nodeId === 3)!.kinds = 6;
    expect(memberStatuses(obs, {}).map((m) => m.kinds)).toEqual([6, 6, 6]);
    const door = doorStatus({ clusterVersion: 5, versions: [] }, obs, '2.6.0', new Date(T0));
    expect(door).toEqual({
      clusterVersion: 6,
      versions: [{ version: '2.6.0', kinds: 6, seenAt: new Date(T0).toISOString() }],
      finalization: null, // pod 2 does not say what its build reads
    });
    obs.health[2]!.kinds = 6;
    expect(doorStatus(door, obs, '2.6.0', new Date(T0 + 1000)).finalization).toBe('2.6.0, finalized at catalogue version 6');
  });
});

type Health = 'Current' | 'InProgress' | 'Failed';

/** kstatus's generic rules for a custom resource (sigs.k8s.io/cli-utils/pkg/kstatus). */
function kstatus(generation: number, observedGeneration: number | undefined, conditions: Condition[]): Health {
  if (observedGeneration !== undefined && observedGeneration !== generation) return 'InProgress';
  const c = (t: string) => conditions.find((x) => x.type === t)?.status;
  if (c('Reconciling') === 'True') return 'InProgress';
  if (c('Stalled') === 'True') return 'Failed';
  return 'Current';
}

describe('the conditions, by kstatus', () => {
  const now = new Date('2026-12-01T00:00:00Z');
  const operations: Partial<Record<Phase, string>> = {
    Forming: 'FormCluster',
    Upgrading: 'RollingUpgrade',
    Scaling: 'ScaleVoters',
    Replacing: 'ReplaceNode',
    Resizing: 'GrowVolumes',
    Promoting: 'PromoteStandby',
    SwitchingOver: 'Switchover',
  };
  const expected: Record<Phase, Health> = {
    Forming: 'InProgress',
    Upgrading: 'InProgress',
    Scaling: 'InProgress',
    Replacing: 'InProgress',
    Resizing: 'InProgress',
    Ready: 'Current',
    Standby: 'Current',
    Promoting: 'InProgress',
    SwitchingOver: 'InProgress',
    Fenced: 'InProgress',
    Degraded: 'InProgress',
    Blocked: 'Failed',
  };
  it.each(PHASES)('%s', (phase) => {
    const type = operations[phase];
    const conditions = clusterConditions(undefined, { phase, message: 'why', operation: type ? { type, step: 'a step' } : null, paused: false, generation: 4, now });
    expect(kstatus(4, 4, conditions)).toBe(expected[phase]);
    const byType = Object.fromEntries(conditions.map((c) => [c.type, c]));
    expect(byType.Ready!.status).toBe(phase === 'Ready' || phase === 'Standby' ? 'True' : 'False');
    expect(byType.Progressing!.status).toBe(type || phase === 'Degraded' || phase === 'Fenced' ? 'True' : 'False');
    if (type) expect(byType.Progressing!.reason).toBe(type);
    expect(byType.Stalled!.status).toBe(phase === 'Blocked' ? 'True' : 'False');
    expect(byType.Paused!.status).toBe('False');
    // Every condition carries what a condition must (metav1.Condition).
    for (const c of conditions) expect(c.reason).toMatch(/^[A-Za-z]+$/);
  });
  it('a spec not rolled out yet is in progress whatever the phase says; Current once its pods run it', () => {
    // Generation 5 asks for a new version; status says 4 was rolled out. The pods still run the old template.
    const obs = cluster(3, 3, 1);
    const v: ClusterView = {
      qc: {
        apiVersion: 'queenmq.com/v1alpha1',
        kind: 'QueenCluster',
        metadata: { name: 'queen', namespace: 'queen', uid: 'u1', generation: 5 },
        spec: { version: '2.6.1', secretName: 'queen', replicas: 3, storage: { size: '50Gi' } },
        status: { voters: [1, 2, 3], observedGeneration: 4 },
      },
      wantedSpecHash: 'spec-2.6.1',
      wantedTemplateHash: 'template-2.6.1',
      statefulSet: obs.statefulSet,
      servicesPresent: true,
      pods: obs.pods,
      claims: obs.claims,
    };
    const conditions = clusterConditions(undefined, { phase: 'Ready', message: '', operation: null, paused: false, generation: 5, now });
    const observed = (view: ClusterView) => rolledOutGeneration(view) ?? view.qc.status!.observedGeneration;
    expect(rolledOutGeneration(v)).toBeUndefined();
    expect(kstatus(5, observed(v), conditions)).toBe('InProgress');
    // The StatefulSet carries the new spec, one pod runs the new template: still in progress.
    v.statefulSet = { ...v.statefulSet!, specHash: 'spec-2.6.1', templateHash: 'template-2.6.1' };
    v.pods = v.pods.map((p, i) => (i === 2 ? { ...p, hash: 'template-2.6.1' } : p));
    expect(kstatus(5, observed(v), conditions)).toBe('InProgress');
    // Every pod on it: observedGeneration catches up, and the cluster is Current.
    v.pods = v.pods.map((p) => ({ ...p, hash: 'template-2.6.1' }));
    expect(rolledOutGeneration(v)).toBe(5);
    expect(kstatus(5, observed(v), conditions)).toBe('Current');
  });
  it('Paused while the annotation holds; a transition time moves only when a status flips', () => {
    const first = clusterConditions(undefined, { phase: 'Ready', message: '', operation: null, paused: true, generation: 1, now });
    expect(first.find((c) => c.type === 'Paused')).toMatchObject({ status: 'True', reason: 'PauseAnnotation' });
    const later = new Date(now.getTime() + 60_000);
    const second = clusterConditions(first, { phase: 'Upgrading', message: 'm', operation: { type: 'RollingUpgrade' }, paused: true, generation: 1, now: later });
    expect(second.find((c) => c.type === 'Paused')!.lastTransitionTime).toBe(now.toISOString());
    expect(second.find((c) => c.type === 'Ready')!.lastTransitionTime).toBe(later.toISOString());
  });
});

describe('what the observer compares before it writes status', () => {
  const now = Date.parse('2026-12-04T12:00:00Z');
  const opts = { nearEntries: 1000, stallAfterMs: 10_000, now };
  const member = (lag: number | null, behindSince: string | null, extra: Partial<MemberStatus> = {}): MemberStatus => ({
    nodeId: 2,
    pod: 'queen-1',
    voter: true,
    learner: false,
    live: true,
    ready: true,
    lag,
    matched: 5000 - (lag ?? 0),
    behindSince,
    restarts: 0,
    lastExitCode: null,
    ...extra,
  });
  const same = (a: MemberStatus, b: MemberStatus) => comparableStatus({ members: [a] }, opts) === comparableStatus({ members: [b] }, opts);
  const ago = (ms: number) => new Date(now - ms).toISOString();

  it('a follower moving under client load is no change: its lag near the leader, its last move a moment ago', () => {
    expect(same(member(0, null), member(3, ago(400)))).toBe(true);
    expect(same(member(3, ago(400)), member(57, ago(900)))).toBe(true);
    // A second behind at 200 pushes a second and back: across the caught-up bound of the gates (100), not across promoteMaxLag.
    expect(same(member(57, null), member(250, null))).toBe(true);
    expect(same(member(250, null), member(1000, null))).toBe(true);
  });

  it('a lag that goes beyond near the leader, or changes its order of magnitude beyond, is one', () => {
    expect(same(member(57, null), member(1500, null))).toBe(false);
    expect(same(member(1500, null), member(9000, null))).toBe(true);
    expect(same(member(9000, null), member(12_000, null))).toBe(false);
    expect(same(member(null, null), member(0, null))).toBe(false);
  });

  it('a node behind without moving for half the stall time is one, and so is its moving again', () => {
    expect(same(member(3, ago(1000)), member(3, ago(6000)))).toBe(false);
    expect(same(member(3, ago(6000)), member(0, null))).toBe(false);
  });

  it('what a person reads in a member is one: Ready, live, restarts, version', () => {
    expect(same(member(0, null), member(0, null, { ready: false }))).toBe(false);
    expect(same(member(0, null), member(0, null, { live: false }))).toBe(false);
    expect(same(member(0, null), member(0, null, { restarts: 1 }))).toBe(false);
    expect(same(member(0, null), member(0, null, { version: '2.6.1' }))).toBe(false);
  });
});
