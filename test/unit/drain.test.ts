// Which pods a drain waits for: only one that clients may have sent requests still in flight.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { drainEvent, leavingPods, nodesLeave, notReadySinceStart } from '../../activities/drain.ts';
import { cluster } from './fixture.ts';

function pod(ready: { status: 'True' | 'False'; at: string } | null, startedAt: string | null): V1Pod {
  return {
    metadata: { name: 'queen-2', uid: 'u' },
    status: {
      conditions: ready ? [{ type: 'Ready', status: ready.status, lastTransitionTime: new Date(ready.at) }] : [],
      containerStatuses: [{ name: 'queen', image: 'i', imageID: '', ready: ready?.status === 'True', restartCount: 0, state: startedAt ? { running: { startedAt: new Date(startedAt) } } : { waiting: { reason: 'ContainerCreating' } } }],
    },
  };
}

describe('a pod not Ready since it started gets no drain wait', () => {
  it('a successor still starting: not Ready since before its container started', () => {
    expect(notReadySinceStart(pod({ status: 'False', at: '2026-12-04T10:00:00Z' }, '2026-12-04T10:00:01Z'))).toBe(true);
    // The same second (timestamps are whole seconds): not Ready since it started.
    expect(notReadySinceStart(pod({ status: 'False', at: '2026-12-04T10:00:01Z' }, '2026-12-04T10:00:01Z'))).toBe(true);
  });

  it('no Ready condition yet, or no container running', () => {
    expect(notReadySinceStart(pod(null, '2026-12-04T10:00:01Z'))).toBe(true);
    expect(notReadySinceStart(pod({ status: 'False', at: '2026-12-04T10:00:00Z' }, null))).toBe(true);
  });

  it('Ready, or Ready once since it started and not now: clients may have sent it requests', () => {
    expect(notReadySinceStart(pod({ status: 'True', at: '2026-12-04T10:00:03Z' }, '2026-12-04T10:00:01Z'))).toBe(false);
    expect(notReadySinceStart(pod({ status: 'False', at: '2026-12-04T10:00:09Z' }, '2026-12-04T10:00:01Z'))).toBe(false);
  });
});

describe('the drain Event names the pods, and the nodes that leave in the order they leave', () => {
  const target = (ordinal: number) => ({ ordinal, name: `queen-${ordinal}`, uid: `u${ordinal}`, ip: null });
  it('one node, several, and a hand-off restart', () => {
    expect(drainEvent([target(4)], `${nodesLeave([target(4)])} the membership`)).toBe('taking pod 4 out of the client Service before node 5 leaves the membership');
    const both = [target(4), target(3)];
    expect(drainEvent(both, `${nodesLeave(both)} the membership`)).toBe('taking pods 3 and 4 out of the client Service before nodes 5 and 4 leave the membership');
    const handOff = [target(2), target(1)];
    expect(drainEvent(handOff, `pod 2 restarts and ${nodesLeave(handOff)} the membership`)).toBe('taking pods 1 and 2 out of the client Service before pod 2 restarts and nodes 3 and 2 leave the membership');
    expect(drainEvent([target(0)], 'it restarts')).toBe('taking pod 0 out of the client Service before it restarts');
  });
});

describe('the pods drained with the first removal of a scale-down', () => {
  const spec = (replicas: 1 | 3) => ({ spec: { version: '2.6.0', secretName: 'queen', replicas } });
  const ordinals = (replicas: 1 | 3, obs: ReturnType<typeof cluster>, except: number) => leavingPods(spec(replicas), obs, except).map((p) => p.ordinal);

  it('every other node above the voters wanted, highest first', () => {
    expect(ordinals(3, cluster(5, 5, 1), 5)).toEqual([3]);
    expect(ordinals(1, cluster(3, 3, 1), 3)).toEqual([1]);
  });

  it('a leader among them too, so its hand-off restart has no drain wait of its own', () => {
    // 3→1 with node 2 leading: node 3 leaves first, pod 1 (node 2's) goes out of the Service with pod 2.
    expect(ordinals(1, cluster(3, 3, 2), 3)).toEqual([1]);
    // 5→3 with node 4 leading.
    expect(ordinals(3, cluster(5, 5, 4), 5)).toEqual([3]);
  });

  it('never a node that stays, nor a pod that terminates', () => {
    const obs = cluster(5, 5, 2);
    expect(ordinals(3, obs, 5)).toEqual([3]);
    obs.pods[3]!.terminating = true;
    expect(ordinals(3, obs, 5)).toEqual([]);
  });
});
