// The removal gate checked once more right before a voter leaves (activities/membership.ts
// removalHeld): the pause annotation is read as every other reader of it reads it, so
// `queenmq.com/pause=false` (or a value it does not take) holds nothing, and a scale-down does not
// wait on a pause that status says is not there.
import { expect, it } from 'vitest';
import type { ActivityDeps } from '../../activities/common.ts';
import { removalHeld } from '../../activities/membership.ts';
import type { QueenCluster } from '../../crd/schema.ts';
import { cluster } from './fixture.ts';

const deps = { settings: { stallAfterMs: 60_000, caughtUpEntries: 1000 } } as unknown as ActivityDeps;

function qc(annotations: Record<string, string>): QueenCluster {
  return {
    apiVersion: 'queenmq.com/v1alpha1',
    kind: 'QueenCluster',
    metadata: { name: 'queen', namespace: 'queen', uid: `removal-held-${JSON.stringify(annotations)}`, annotations },
    spec: { version: '2.6.0', replicas: 3, secretName: 'queen', storage: { size: '1Gi' } },
  } as QueenCluster;
}

it('pause=true holds the removal of a voter', () => {
  expect(removalHeld(deps, qc({ 'queenmq.com/pause': 'true' }), cluster(5, 5, 1), 5)).toBe('paused by the queenmq.com/pause annotation');
});

it('pause=false, a value the annotation does not take, or no annotation hold nothing', () => {
  for (const a of [{ 'queenmq.com/pause': 'false' }, { 'queenmq.com/pause': 'yes' }, {}] as Record<string, string>[]) {
    expect(removalHeld(deps, qc(a), cluster(5, 5, 1), 5)).toBeNull();
  }
});
