// Which waits park in the workflow and which stay in a step (plan/gates.ts), and the token the
// watcher compares to wake a parked operation (activities/waits.ts).
import type { V1PersistentVolumeClaim, V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { wakeToken } from '../../activities/waits.ts';
import type { OwnedObjects } from '../../activities/cluster-cache.ts';
import type { QueenCluster } from '../../crd/schema.ts';
import { GATE_NAMES, isParked, LIFTED_BY, liftOf } from '../../plan/gates.ts';

describe('who lifts a gate', () => {
  it('parks the waits for a person, and only those, out of the operations\' steps', () => {
    expect(liftOf('approved', 'Upgrading')).toBe('person');
    expect(liftOf('not-paused', 'Scaling')).toBe('person');
    expect(liftOf('new-version-healthy', 'Blocked')).toBe('person');
    expect(liftOf('replace-target', 'Blocked')).toBe('person');
    // Lifted by something outside the QueenCluster: an object someone else owns, an image, a StorageClass.
    expect(liftOf('objects-ours', 'Blocked')).toBe('outside');
    expect(liftOf('image-pull', 'Upgrading')).toBe('outside');
    expect(liftOf('volume-can-grow', 'Blocked')).toBe('outside');
    // The machine's: a step waits for them.
    // A node that stops reporting, a voter that does not move: mostly back by themselves (a person's
    // taint, or replace annotation, ends the wait otherwise).
    for (const gate of ['pod-ready', 'pod-ready-for-min-ready-seconds', 'voter-caught-up', 'learner-caught-up', 'write-commits', 'canary-soaked', 'disruption-budget', 'node-down', 'voter-not-stalled'] as const) {
      expect(liftOf(gate, 'Upgrading')).toBe('machine');
    }
    expect(liftOf(null, 'Scaling')).toBe('machine');
  });

  it('never lets a Blocked hold wait in a step, whatever its gate', () => {
    expect(liftOf('leader-known', 'Blocked')).toBe('outside');
    expect(liftOf(undefined, 'Blocked')).toBe('outside');
  });

  it('names who lifts every gate', () => {
    expect(Object.keys(LIFTED_BY).sort()).toEqual([...GATE_NAMES].sort());
  });

  it('tells a parked step from a result', () => {
    expect(isParked({ parked: { gate: 'approved', phase: 'Upgrading', message: 'm', lift: 'person' } })).toBe(true);
    expect(isParked({ kind: 'restart' })).toBe(false);
    expect(isParked(null)).toBe(false);
    expect(isParked('rollback')).toBe(false);
  });
});

describe('the token that wakes a parked operation', () => {
  const qc = (over: Partial<QueenCluster['metadata']> = {}, status: QueenCluster['status'] = {}): QueenCluster =>
    ({
      apiVersion: 'queenmq.com/v1alpha1',
      kind: 'QueenCluster',
      metadata: { name: 'queen', namespace: 'q', uid: 'u1', generation: 2, annotations: { 'queenmq.com/approve': '2.6.0' }, ...over },
      spec: { version: '2.6.1', replicas: 3, secretName: 'queen', storage: { size: '1Gi' } },
      status,
    }) as QueenCluster;
  const pod = (ordinal: number, ready = true): V1Pod => ({
    metadata: { name: `queen-${ordinal}`, uid: `p${ordinal}`, labels: { 'app.kubernetes.io/instance': 'queen' } },
    status: {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
      containerStatuses: [{ name: 'queen', ready, restartCount: 0, image: 'q', imageID: '', state: { running: {} } }],
    },
  });
  const claim = (ordinal: number, size = '1Gi'): V1PersistentVolumeClaim => ({
    metadata: { name: `data-queen-${ordinal}`, uid: `c${ordinal}` },
    spec: { resources: { requests: { storage: size } } },
    status: { phase: 'Bound', capacity: { storage: size } },
  });
  const owned = (pods: V1Pod[], claims = [0, 1, 2].map((o) => claim(o))): OwnedObjects => ({
    pods,
    claims,
    services: [],
    statefulSet: { metadata: { uid: 's1' }, spec: { replicas: 3 } } as V1StatefulSet,
  });
  const three = () => [0, 1, 2].map((o) => pod(o));

  it('stays the same while only the status moves', () => {
    expect(wakeToken(qc({}, { phase: 'Upgrading', message: 'a' }), owned(three()))).toBe(wakeToken(qc({}, { phase: 'Blocked', message: 'b' }), owned(three())));
  });

  it('changes with an annotation, the spec, a pod that becomes Ready, or a claim that grows', () => {
    const base = wakeToken(qc(), owned(three()));
    expect(wakeToken(qc({ annotations: { 'queenmq.com/approve': '2.6.1' } }), owned(three()))).not.toBe(base);
    expect(wakeToken(qc({ generation: 3 }), owned(three()))).not.toBe(base);
    expect(wakeToken(qc(), owned([pod(0), pod(1, false), pod(2)]))).not.toBe(base);
    expect(wakeToken(qc(), owned(three(), [claim(0, '2Gi'), claim(1), claim(2)]))).not.toBe(base);
  });

  it('does not depend on the order the watches list the objects in', () => {
    expect(wakeToken(qc(), owned([pod(2), pod(0), pod(1)]))).toBe(wakeToken(qc(), owned(three())));
  });
});
