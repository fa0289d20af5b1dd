// Which operation a cluster needs, and what the watcher does about it: one operation at a time,
// the most urgent first, no hot loop after a cancel, a retry when a person asks.
import { describe, expect, it } from 'vitest';
import type { QueenCluster } from '../../crd/schema.ts';
import { decide, neededOperation, type ClusterView, type RunningOperation } from '../../plan/decide.ts';
import { cluster, T0 } from './fixture.ts';

function view(over: { annotations?: Record<string, string>; status?: QueenCluster['status']; spec?: Partial<QueenCluster['spec']> } = {}): ClusterView {
  const obs = cluster(3, 3, 1);
  return {
    qc: {
      apiVersion: 'queenmq.com/v1alpha1',
      kind: 'QueenCluster',
      metadata: { name: 'queen', namespace: 'queen', uid: 'u1', annotations: over.annotations ?? {} },
      spec: { version: '2.6.0', secretName: 'queen', replicas: 3, ...over.spec },
      status: over.status ?? { voters: [1, 2, 3] },
    },
    wantedSpecHash: 'spec',
    wantedTemplateHash: 'new',
    statefulSet: obs.statefulSet,
    servicesPresent: true,
    pods: obs.pods,
    claims: obs.claims,
  };
}

const upgrade = (v: ClusterView) => {
  v.wantedTemplateHash = 'newer';
  v.wantedSpecHash = 'spec2';
  return v;
};
const running = (type: RunningOperation['type']): RunningOperation => ({ type, workflowId: 'queencluster/queen/queen', runId: 'r1' });

describe('the operation a cluster needs', () => {
  it('forms a cluster that never had a leader, or whose objects are gone', () => {
    expect(neededOperation(view({ status: {} }))?.type).toBe('FormCluster');
    const v = view();
    v.statefulSet = null;
    expect(neededOperation(v)?.type).toBe('FormCluster');
    const w = view();
    w.servicesPresent = false;
    expect(neededOperation(w)?.type).toBe('FormCluster');
  });
  it('needs nothing when the pods run the wanted template', () => {
    expect(neededOperation(view())).toBeNull();
    expect(decide(view(), null, T0)).toEqual({ action: 'none', why: 'the cluster is as specified' });
  });
  it('rolls the pods when the template changed, targeting the version', () => {
    expect(neededOperation(upgrade(view()))).toEqual({ type: 'RollingUpgrade', fingerprint: 'spec:spec2', target: '2.6.0' });
  });
  it('puts a replacement before voters, voters before volumes, volumes before a roll', () => {
    const v = upgrade(view({ annotations: { 'queenmq.com/replace-pod': 'queen-1' }, spec: { replicas: 5, storage: { size: '100Gi' } } }));
    expect(neededOperation(v)?.type).toBe('ReplaceNode');
    delete v.qc.metadata.annotations!['queenmq.com/replace-pod'];
    expect(neededOperation(v)?.type).toBe('ScaleVoters');
    v.qc.spec.replicas = 3;
    expect(neededOperation(v)?.type).toBe('GrowVolumes');
    v.qc.spec.storage = { size: '50Gi' };
    expect(neededOperation(v)?.type).toBe('RollingUpgrade');
  });
});

describe('what the watcher does', () => {
  it('starts the needed operation with the retry token it saw', () => {
    expect(decide(upgrade(view({ annotations: { 'queenmq.com/retry': 'a' } })), null, T0)).toMatchObject({ action: 'start', need: { type: 'RollingUpgrade' }, retryToken: 'a' });
  });
  it('starts nothing while an operation runs: the running one re-reads its target', () => {
    expect(decide(upgrade(view()), running('RollingUpgrade'), T0)).toEqual({ action: 'none', why: 'RollingUpgrade runs' });
  });
  it('asks a running upgrade to yield to a more urgent operation it can run', () => {
    const v = view({ status: {} });
    v.statefulSet = null;
    expect(decide(v, running('RollingUpgrade'), T0)).toMatchObject({ action: 'yield', need: { type: 'FormCluster' } });
  });
  it('asks a running upgrade to yield to a replacement', () => {
    expect(decide(upgrade(view({ annotations: { 'queenmq.com/replace-pod': 'queen-1' } })), running('RollingUpgrade'), T0)).toMatchObject({
      action: 'yield',
      need: { type: 'ReplaceNode', target: 'queen-1', fingerprint: 'replace:queen-1' },
    });
  });
  it('does not ask a grow to yield while it creates its own StatefulSet again (issue 8, item 10)', () => {
    const v = view({ status: { voters: [1, 2, 3], operation: { type: 'GrowVolumes', workflowId: 'w', gate: 'statefulset-recreated' } } });
    v.statefulSet = null;
    expect(decide(v, running('GrowVolumes'), T0)).toEqual({ action: 'none', why: 'GrowVolumes runs' });
    // Gone by another hand at any other step: formed again first.
    v.qc.status!.operation!.gate = 'volume-grown';
    expect(decide(v, running('GrowVolumes'), T0)).toMatchObject({ action: 'yield', need: { type: 'FormCluster' } });
  });
  it('cancels a running operation when the cancel annotation asks', () => {
    expect(decide(view({ annotations: { 'queenmq.com/cancel': 'true' } }), running('RollingUpgrade'), T0)).toMatchObject({ action: 'cancel' });
  });
  it('does not start the same operation again after a cancel, until the spec changes or a retry is asked', () => {
    const cancelled = { type: 'RollingUpgrade', result: 'Cancelled' as const, fingerprint: 'spec:spec2', retryToken: '', message: 'the upgrade to 2.6.0 was cancelled' };
    const v = upgrade(view({ status: { voters: [1, 2, 3], lastOperation: cancelled } }));
    expect(decide(v, null, T0)).toEqual({ action: 'stopped', need: expect.objectContaining({ type: 'RollingUpgrade' }), message: 'the upgrade to 2.6.0 was cancelled' });
    v.qc.metadata.annotations = { 'queenmq.com/retry': '1' };
    expect(decide(v, null, T0)).toMatchObject({ action: 'start', retryToken: '1' });
    const changed = upgrade(view({ status: { voters: [1, 2, 3], lastOperation: cancelled } }));
    changed.wantedSpecHash = 'spec3';
    expect(decide(changed, null, T0)).toMatchObject({ action: 'start' });
  });
  it('does not start again an operation terminated from outside, until a retry is asked (issue 8, item 3)', () => {
    const terminated = { type: 'RollingUpgrade', result: 'Terminated' as const, fingerprint: 'spec:spec2', retryToken: '', message: 'RollingUpgrade (2.6.1) was terminated from outside' };
    const v = upgrade(view({ status: { voters: [1, 2, 3], lastOperation: terminated } }));
    expect(decide(v, null, T0)).toMatchObject({ action: 'stopped', message: 'RollingUpgrade (2.6.1) was terminated from outside' });
    v.qc.metadata.annotations = { 'queenmq.com/retry': '2' };
    expect(decide(v, null, T0)).toMatchObject({ action: 'start', retryToken: '2' });
  });
  it('starts a yielded operation again', () => {
    const yielded = { type: 'RollingUpgrade', result: 'Yielded' as const, fingerprint: 'spec:spec2', retryToken: '' };
    expect(decide(upgrade(view({ status: { voters: [1, 2, 3], lastOperation: yielded } })), null, T0)).toMatchObject({ action: 'start' });
  });
  it('a stale cache does not restart what just succeeded', () => {
    const done = { type: 'RollingUpgrade', result: 'Succeeded' as const, fingerprint: 'spec:spec2', finishedAt: new Date(T0 - 5_000).toISOString() };
    const v = upgrade(view({ status: { voters: [1, 2, 3], lastOperation: done } }));
    expect(decide(v, null, T0).action).toBe('none');
    expect(decide(v, null, T0 + 60_000).action).toBe('start');
  });
  it('does not start an upgrade again after it rolled back, until the spec changes or a retry is asked', () => {
    const rolledBack = { type: 'RollingUpgrade', result: 'RolledBack' as const, fingerprint: 'spec:spec2', retryToken: '', message: 'rolled back to 2.5.0: ...' };
    const v = upgrade(view({ status: { voters: [1, 2, 3], lastOperation: rolledBack } }));
    expect(decide(v, null, T0)).toMatchObject({ action: 'stopped', message: 'rolled back to 2.5.0: ...' });
    v.qc.metadata.annotations = { 'queenmq.com/retry': '7' };
    expect(decide(v, null, T0)).toMatchObject({ action: 'start', retryToken: '7' });
    v.qc.metadata.annotations = {};
    v.wantedSpecHash = 'spec3';
    expect(decide(v, null, T0)).toMatchObject({ action: 'start', need: { fingerprint: 'spec:spec3' } });
  });
  it('plan-only: starts nothing and says so; asks no running operation to yield; cancels what it is asked to', () => {
    const v = upgrade(view({ annotations: { 'queenmq.com/plan-only': 'true' } }));
    expect(decide(v, null, T0)).toEqual({
      action: 'paused',
      need: expect.objectContaining({ type: 'RollingUpgrade' }),
      message: 'plan only (queenmq.com/plan-only): RollingUpgrade (2.6.0) would start; its steps are in status.plan',
    });
    const r = view({ annotations: { 'queenmq.com/plan-only': 'true', 'queenmq.com/replace-pod': 'queen-1' } });
    expect(decide(r, running('RollingUpgrade'), T0)).toEqual({ action: 'none', why: 'RollingUpgrade runs' });
    r.qc.metadata.annotations!['queenmq.com/cancel'] = 'true';
    expect(decide(r, running('RollingUpgrade'), T0)).toMatchObject({ action: 'cancel' });
    // plan=true writes a plan and holds nothing.
    expect(decide(upgrade(view({ annotations: { 'queenmq.com/plan': 'true' } })), null, T0)).toMatchObject({ action: 'start' });
  });
  it('paused: starts nothing', () => {
    expect(decide(upgrade(view({ annotations: { 'queenmq.com/pause': 'true' } })), null, T0)).toMatchObject({ action: 'paused', need: { type: 'RollingUpgrade' } });
  });
  it('a StatefulSet with fewer pods than voters is scaled back (G5)', () => {
    const v = view();
    v.statefulSet = { ...v.statefulSet!, replicas: 2 };
    expect(decide(v, null, T0)).toMatchObject({ action: 'start', need: { type: 'ScaleVoters', target: '3 voters' } });
  });
});
