// status.plan as the observer writes it: only while an annotation asks for it, removed once none
// does, not written again while it says the same, and saying what the operation waits for.
import { describe, expect, it } from 'vitest';
import { planStatus } from '../../activities/plan.ts';
import { specHash, wantedTemplateHash } from '../../activities/resources.ts';
import type { QueenCluster } from '../../crd/schema.ts';
import { cluster, T0 } from './fixture.ts';

function qcOf(annotations: Record<string, string>, version = '2.6.0'): QueenCluster {
  return {
    apiVersion: 'queenmq.com/v1alpha1',
    kind: 'QueenCluster',
    metadata: { name: 'queen', namespace: 'queen', uid: 'u1', generation: 4, annotations },
    spec: { version, secretName: 'queen', replicas: 3, storage: { size: '50Gi' } },
    status: { voters: [1, 2, 3] },
  };
}

/** The fixture cluster, its pods and StatefulSet on the template of the spec at `rolledOut`. */
function observed(rolledOut: QueenCluster) {
  const obs = cluster(3, 3, 2);
  const hash = wantedTemplateHash(rolledOut);
  for (const p of obs.pods) p.hash = hash;
  obs.statefulSet = { ...obs.statefulSet!, templateHash: hash, specHash: specHash(rolledOut) };
  obs.wantedHash = hash;
  return obs;
}

describe('status.plan', () => {
  const now = new Date(T0);
  it('is written only while plan or plan-only is set, and removed after', () => {
    const obs = observed(qcOf({}));
    expect(planStatus(qcOf({}), obs, now)).toBeUndefined();
    const plan = planStatus(qcOf({ 'queenmq.com/plan': 'true' }), obs, now);
    expect(plan).toEqual({
      operation: null,
      target: '',
      message: 'the cluster is as specified: no operation would start',
      generation: 4,
      steps: [],
      computedAt: now.toISOString(),
    });
    const withPlan = { ...qcOf({}), status: { voters: [1, 2, 3], plan: plan! } };
    expect(planStatus(withPlan, obs, now)).toBeNull();
    expect(planStatus({ ...withPlan, metadata: { ...withPlan.metadata, annotations: { 'queenmq.com/plan': 'false' } } }, obs, now)).toBeNull();
  });

  it('says what the operation waits for, and is not written again while it says the same', () => {
    const obs = observed(qcOf({}));
    const qc = qcOf({ 'queenmq.com/plan-only': 'true' }, '2.6.1');
    const plan = planStatus(qc, obs, now)!;
    expect(plan.operation).toBe('RollingUpgrade');
    expect(plan.steps!.map((s) => s.step)).toEqual([
      'the pod template now runs ghcr.io/queen-mq/queen:2.6.1; pods restart one at a time',
      'restarting pod 2',
      'restarting pod 0',
      'restarting pod 1',
    ]);
    expect(plan.message).toMatch(/; it waits: plan only \(queenmq\.com\/plan-only\): RollingUpgrade \(2\.6\.1\) would start; its steps are in status\.plan$/);
    // Stored as the API server keeps it (a null is no key): the same plan is not written again.
    const stored = JSON.parse(JSON.stringify(plan, (_k, v: unknown) => (v === null ? undefined : v)));
    expect(planStatus({ ...qc, status: { voters: [1, 2, 3], plan: stored } }, obs, new Date(T0 + 60_000))).toBeUndefined();
    // plan alone holds nothing: the operation starts now.
    expect(planStatus(qcOf({ 'queenmq.com/plan': 'true' }, '2.6.1'), obs, now)!.message).toMatch(/; it starts now$/);
  });
});
