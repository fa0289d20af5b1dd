// Plans: the operation the spec would start and its steps, computed by the rules the operations
// run, on a fixture cluster. The e2e scenario `plan` compares plans with the runs that follow.
import { describe, expect, it } from 'vitest';
import { withDefaults } from '../../crd/defaults.ts';
import type { QueenCluster, QueenClusterSpec } from '../../crd/schema.ts';
import type { ClusterView } from '../../plan/decide.ts';
import type { Observation } from '../../plan/observation.ts';
import { planOperation } from '../../plan/preview.ts';
import { DRAIN_GATES, LEAVE_GATES, RESTART_GATES, STOP_GATE_NAMES } from '../../plan/steps.ts';
import { cluster, pod } from './fixture.ts';

function planOf(
  obs: Observation,
  spec: Partial<QueenClusterSpec> = {},
  annotations: Record<string, string> = {},
  wantedTemplateHash = 'new',
  status: QueenCluster['status'] = {},
) {
  const qc: QueenCluster = {
    apiVersion: 'queenmq.com/v1alpha1',
    kind: 'QueenCluster',
    metadata: { name: 'queen', namespace: 'queen', uid: 'u1', annotations },
    spec: { version: '2.6.1', secretName: 'queen', replicas: 3, storage: { size: '50Gi' }, ...spec },
    status: { voters: obs.membership?.voters ?? [], ...status },
  };
  const view: ClusterView = {
    qc,
    wantedSpecHash: 'spec',
    wantedTemplateHash,
    statefulSet: obs.statefulSet,
    servicesPresent: true,
    pods: obs.pods,
    claims: obs.claims,
  };
  return planOperation({ view, obs, spec: withDefaults(qc.spec), image: 'ghcr.io/queen-mq/queen:2.6.1' });
}

/** A cluster whose pods and StatefulSet carry the old template. */
function behind(obs: Observation): Observation {
  for (const p of obs.pods) p.hash = 'old';
  obs.statefulSet!.templateHash = 'old';
  return obs;
}

const steps = (p: ReturnType<typeof planOf>) => p.steps.map((s) => s.step);

describe('a plan', () => {
  it('of a cluster formed from a backup: the backup checked, pod 0 alone and recovered, then the other voters', () => {
    const obs = cluster(0, 0, 1);
    obs.membership = null;
    obs.statefulSet = null;
    const p = planOf(obs, { bootstrap: { fromBackup: { name: 'queen-20261206-180000' } } });
    expect(p.operation).toBe('FormCluster');
    expect(steps(p)).toEqual([
      'check that the backup is ready to restore from',
      'create the claim of pod 0 from the backup queen-20261206-180000',
      'create the Services, the disruption budget and the StatefulSet with pod 0 alone, QUEEN_RAFT_FORCE_RECOVER=1',
      'wait for node 1 to recover alone and lead',
      'restart pod 0 without QUEEN_RAFT_FORCE_RECOVER',
      'wait for every voter to be live and Ready',
      'wait for a write to commit',
      'then changing the voters to 3: the other nodes added as learners and promoted together',
    ]);
  });

  it('of a cluster as specified: no operation', () => {
    expect(planOf(cluster(3, 3, 2))).toEqual({ operation: null, target: '', steps: [], message: 'the cluster is as specified: no operation would start' });
  });

  it('of an upgrade: the template, the pods that do not lead from the highest ordinal, the leader last, each through the stop gate', () => {
    const p = planOf(behind(cluster(3, 3, 2)));
    expect(p.operation).toBe('RollingUpgrade');
    expect(p.target).toBe('2.6.1');
    expect(steps(p)).toEqual(['the pod template now runs ghcr.io/queen-mq/queen:2.6.1; pods restart one at a time', 'restarting pod 2', 'restarting pod 0', 'restarting pod 1']);
    expect(p.steps[3]).toMatchObject({ note: 'the leader, last' });
    // Each restart: the stop gate, the drain in its last seconds, the eviction (what restartPod waits on).
    // After the first, a failure of the new version holds the upgrade (onFailure Hold, the default).
    expect(p.steps.slice(1).map((x) => x.gates)).toEqual([RESTART_GATES, ['new-version-healthy', ...RESTART_GATES], ['new-version-healthy', ...RESTART_GATES]]);
    expect(STOP_GATE_NAMES).toEqual(expect.arrayContaining(['not-paused', 'pod-ready-for-min-ready-seconds', 'voter-caught-up', 'voter-not-stalled', 'write-commits']));
    expect(RESTART_GATES).toEqual(expect.arrayContaining([...STOP_GATE_NAMES, 'pod-out-of-endpoints', 'requests-drained', 'disruption-budget', 'pod-gone']));
    expect(p.message).toBe('RollingUpgrade (2.6.1): the pod template now runs ghcr.io/queen-mq/queen:2.6.1; pods restart one at a time, restarting pod 2, restarting pod 0, restarting pod 1');
  });

  it('of a revert to a version whose build cannot start on the cluster: Blocked before any pod stops, and why', () => {
    const obs = behind(cluster(3, 3, 2));
    for (const h of Object.values(obs.health)) Object.assign(h, { version: '2.7.0', kinds: 7, clusterVersion: 7 });
    const status = { version: '2.7.0', clusterVersion: 7, versions: [{ version: '2.6.0', kinds: 6 }, { version: '2.7.0', kinds: 7 }] };
    const p = planOf(obs, { version: '2.6.0' }, {}, 'new', status);
    expect(p.operation).toBe('RollingUpgrade');
    expect(p.steps).toEqual([
      {
        step:
          '2.6.0 cannot start on this cluster: its build reads catalogue version 6 and the cluster is at 7: no pod is stopped; set spec.version back to 2.7.0 ' +
          `(or to a version whose build reads 7 or more): kubectl -n queen patch queencluster queen --type merge -p '{"spec":{"version":"2.7.0"}}'`,
        gates: ['version-can-boot'],
        note: 'Blocked: it waits for a person',
      },
    ]);
    // The same revert before the raise goes as any upgrade.
    const before = behind(cluster(3, 3, 2));
    for (const h of Object.values(before.health)) Object.assign(h, { version: '2.7.0', kinds: 7, clusterVersion: 6 });
    expect(steps(planOf(before, { version: '2.6.0' }, {}, 'new', { ...status, clusterVersion: 6 })).slice(1)).toEqual(['restarting pod 2', 'restarting pod 0', 'restarting pod 1']);
  });

  it('of an upgrade to a build that reads more: the last step says the leader raises the catalogue version after it', () => {
    const obs = behind(cluster(3, 3, 2));
    for (const h of Object.values(obs.health)) Object.assign(h, { kinds: 6, clusterVersion: 6 });
    const status = { clusterVersion: 6, versions: [{ version: '2.6.0', kinds: 6 }, { version: '2.7.0', kinds: 7 }] };
    const p = planOf(obs, { version: '2.7.0' }, {}, 'new', status);
    expect(p.steps.at(-1)).toMatchObject({
      step: 'restarting pod 1',
      note:
        'the leader, last; once every pod runs 2.7.0, the leader raises the cluster from catalogue version 6 to 7: from then on 2.6.0 cannot start on it ' +
        '(spec.upgrade.finalize: Manual keeps the way back open)',
    });
  });

  it('of an upgrade with a pod that is not Ready: that pod first, whatever its ordinal', () => {
    const obs = behind(cluster(3, 3, 3));
    pod(obs, 0).ready = false;
    const p = planOf(obs);
    expect(steps(p).slice(1)).toEqual(['restarting pod 0', 'restarting pod 1', 'restarting pod 2']);
    expect(p.steps[1]).toMatchObject({ note: 'not Ready on the old template: it goes first' });
  });

  it('of a fix-forward from a build Ready on no pod: the restarts that go although other pods are not Ready say so, as their Events do', () => {
    const obs = behind(cluster(3, 3, 1));
    for (const p of obs.pods) Object.assign(p, { ready: false, readySince: null });
    const p = planOf(obs, { version: '2.7.1' });
    const why = 'the version it leaves is Ready on none of its pods, while the voters that stay are live, caught up and commit writes';
    expect(steps(p).slice(1)).toEqual([
      `restarting pod 2 although no pod is Ready: ${why}; pod 2 serves no client, so stopping it cuts none off`,
      `restarting pod 1 although pod 0 is not Ready: ${why}; pod 1 serves no client, so stopping it cuts none off`,
      'restarting pod 0',
    ]);
    for (const s of p.steps.slice(1)) expect(s.gates).toEqual(expect.arrayContaining([...RESTART_GATES]));
    expect(p.steps[3]!.note).toBe('not Ready on the old template, and the leader: after the other pods that are not Ready');
    // With a pod of the old build Ready, none is waived: the plan is the plain one.
    pod(obs, 0).ready = true;
    expect(steps(planOf(obs, { version: '2.7.1' })).slice(1)).toEqual(['restarting pod 2', 'restarting pod 1', 'restarting pod 0']);
  });

  it('of an upgrade with a canary and an approval: the soak after the first pod, the approval before the leader', () => {
    const p = planOf(behind(cluster(3, 3, 1)), { upgrade: { canarySeconds: 90, approval: 'Manual' } });
    expect(steps(p).slice(1)).toEqual(['restarting pod 2', 'soaking pod 2 on 2.6.1 for 1m30s', 'restarting pod 1', 'restarting pod 0']);
    // (onFailure Hold, the default: once a pod runs the new version, a failure of it holds the upgrade.)
    expect(p.steps[1]!.gates).toEqual(RESTART_GATES);
    expect(p.steps[2]!.gates).toEqual(['canary-soaked', 'new-version-healthy']);
    expect(p.steps[3]!.gates).toEqual(['new-version-healthy', ...RESTART_GATES]);
    expect(p.steps[4]!.gates).toEqual(['new-version-healthy', 'approved', ...RESTART_GATES]);
    const rollback = planOf(behind(cluster(3, 3, 1)), { upgrade: { canarySeconds: 90, onFailure: 'Rollback' } });
    expect(rollback.steps[2]!.gates).toEqual(['canary-soaked']);
    expect(rollback.steps[4]!.gates).toEqual(RESTART_GATES);
  });

  it('of an upgrade half done: what is left (no canary once a pod runs the new version)', () => {
    const obs = behind(cluster(5, 5, 3));
    obs.statefulSet!.templateHash = 'new';
    pod(obs, 4).hash = 'new';
    expect(steps(planOf(obs, { replicas: 5, upgrade: { canarySeconds: 60 } }))).toEqual(['restarting pod 3', 'restarting pod 1', 'restarting pod 0', 'restarting pod 2']);
  });

  it('of 3 to 5 voters: pods, each learner, one promotion (the README\'s lines)', () => {
    const p = planOf(cluster(3, 3, 1), { replicas: 5 });
    expect(p.operation).toBe('ScaleVoters');
    expect(steps(p)).toEqual(['adding pods for 5 voters', 'adding node 4 as a learner', 'adding node 5 as a learner', 'promoting nodes 4 and 5 to voters']);
    // The waits nextVoterStep looks at before each step, then what the step runs.
    expect(p.steps[0]!.gates).toEqual(['leader-known', 'no-change-in-flight', 'statefulset-present']);
    expect(p.steps[1]!.gates).toEqual(['leader-known', 'no-change-in-flight', 'statefulset-present', 'pod-running', 'membership-change']);
    // The promotion's, and after it the new voters' pods Ready before the operation ends.
    expect(p.steps[3]!.gates).toEqual(['leader-known', 'no-change-in-flight', 'statefulset-present', 'learner-caught-up', 'membership-change', 'pod-ready']);
  });

  it('of 5 to 3 voters with node 5 leading: the hand-off first, then members, pods and claims', () => {
    const p = planOf(cluster(5, 5, 5), { replicas: 3 });
    expect(steps(p)).toEqual([
      'node 5 leads: stopping its pod once so it hands leadership away before it is removed',
      'removing node 5 from the membership',
      'removing node 4 from the membership',
      'removing the pods above node 3',
      'deleting the volume claims of pods 3 and 4',
    ]);
    expect(p.steps[0]!.gates).toEqual(expect.arrayContaining([...RESTART_GATES]));
    // A voter leaves through the stop gate (issue 8, item 4), its pod drained first.
    expect(p.steps[1]!.gates).toEqual(expect.arrayContaining([...STOP_GATE_NAMES, ...LEAVE_GATES]));
    expect(p.steps[1]!.gates).toEqual(expect.arrayContaining(['not-paused', 'voter-not-stalled', 'write-commits', 'pod-out-of-endpoints', 'requests-drained', 'membership-change']));
    // A claim goes once its pod is gone.
    expect(p.steps[4]!.gates).toContain('pod-gone');
  });

  it('of 3 voters again after a scale-down that stopped once nodes 3 and 2 left: both volumes emptied in one step, then learners, one promotion', () => {
    const obs = cluster(3, 3, 1);
    const m = obs.membership!;
    m.members = m.members.filter((x) => x.nodeId === 1);
    m.voters = [1];
    const p = planOf(obs, { replicas: 3 });
    expect(steps(p)).toEqual([
      'deleting the volumes of pods 1 and 2: they hold the data nodes 2 and 3 had before they left the membership',
      'adding node 2 as a learner',
      'adding node 3 as a learner',
      'promoting nodes 2 and 3 to voters',
    ]);
    // The pods are drained before they go.
    expect(p.steps[0]!.gates).toEqual(expect.arrayContaining([...DRAIN_GATES]));
  });

  it('of voters while a membership change is in flight: the wait, and no guess past it', () => {
    const obs = cluster(3, 3, 1);
    obs.membership!.changeInFlight = true;
    const p = planOf(obs, { replicas: 5 });
    expect(p.steps).toEqual([{ step: 'a membership change is in flight', gates: ['no-change-in-flight'], note: 'it waits for this first; the steps after depend on how it clears' }]);
  });

  it('of a replacement: out of the membership, the volume, back as a learner, promoted; a leader hands off first', () => {
    const follower = planOf(cluster(3, 3, 1), {}, { 'queenmq.com/replace-pod': 'queen-1' });
    expect(follower.operation).toBe('ReplaceNode');
    expect(steps(follower)).toEqual([
      'replacing pod 1',
      'removing node 2 from the membership',
      'deleting the volume of pod 1',
      'adding node 2 as a learner',
      'promoting node 2 to voters',
      'pod 1 is a voter again',
    ]);
    expect(follower.steps[1]!.gates).toEqual(expect.arrayContaining([...STOP_GATE_NAMES, ...LEAVE_GATES]));
    expect(follower.steps[2]!.gates).toEqual(['old-volume-gone', ...DRAIN_GATES]);
    const leader = planOf(cluster(3, 3, 2), {}, { 'queenmq.com/replace-pod': 'queen-1' });
    expect(steps(leader).slice(0, 3)).toEqual([
      'replacing pod 1',
      'pod 1 leads: stopping it once so it hands leadership away before it is removed',
      'removing node 2 from the membership',
    ]);
    expect(leader.steps[1]!.gates).toEqual(RESTART_GATES);
  });

  it('of bigger volumes: the claims together, then the StatefulSet again', () => {
    const p = planOf(cluster(3, 3, 1), { storage: { size: '100Gi' } });
    expect(p.operation).toBe('GrowVolumes');
    expect(steps(p)).toEqual([
      'growing the volumes of pods 0, 1 and 2 to 100Gi',
      'recreating the StatefulSet with 100Gi volumes; its pods keep running',
    ]);
    expect(p.steps.map((x) => x.gates)).toEqual([
      ['statefulset-present', 'volume-can-grow'],
      ['statefulset-present', 'volume-can-grow', 'volume-grown', 'statefulset-recreated'],
    ]);
  });

  it('does not change the observation it is computed from', () => {
    const obs = behind(cluster(3, 3, 2));
    const copy = structuredClone(obs);
    planOf(obs, { replicas: 5 });
    planOf(obs);
    expect(obs).toEqual(copy);
  });
});
