// Volume growth as table tests: the reference operator's scenario S11. Every claim asks for the
// new size, one at a time; a file system that waits for a restart gets one; then the StatefulSet
// is created again with the new claim template.
import { describe, expect, it } from 'vitest';
import type { Observation } from '../../workflows/plan/observation.ts';
import { nextVolumeStep } from '../../workflows/plan/volumes.ts';
import { cluster } from './fixture.ts';

const GI = 1024 ** 3;
const step = (obs: Observation, template = 50 * GI) => nextVolumeStep(obs, '100Gi', 100 * GI, template);

describe('volumes grow before the StatefulSet takes the new size (S11)', () => {
  it('expands each claim, waits for the volumes, restarts the pod that needs it, recreates the StatefulSet', () => {
    const obs = cluster(3, 3, 3);
    expect(step(obs)).toEqual({ kind: 'expand', ordinal: 0, claimName: 'data-queen-0', claimUid: 'claim-a', message: 'growing the volume of pod 0 to 100Gi' });
    for (const c of obs.claims) Object.assign(c, { request: '100Gi', requestBytes: 100 * GI });
    expect(step(obs)).toEqual({ kind: 'wait', message: 'the volume of pod 0 is growing to 100Gi', gate: 'volume-grown' });
    obs.claims[0]!.capacityBytes = 100 * GI;
    obs.claims[1]!.resizePending = true;
    expect(step(obs)).toEqual({
      kind: 'restart',
      ordinal: 1,
      message: 'restarting pod 1 to finish growing its volume',
      next: 'pod 1 must restart to finish growing its volume',
    });
    obs.claims[1]!.capacityBytes = 100 * GI;
    obs.claims[2]!.capacityBytes = 100 * GI;
    expect(step(obs)).toEqual({ kind: 'recreate', message: 'recreating the StatefulSet with 100Gi volumes; its pods keep running' });
    expect(step(obs, 100 * GI)).toEqual({ kind: 'done' });
  });
  it('a claim not bound yet (no capacity) is not waited for', () => {
    const obs = cluster(3, 3, 3);
    for (const c of obs.claims) Object.assign(c, { request: '100Gi', requestBytes: 100 * GI });
    obs.claims[0]!.capacityBytes = 0;
    obs.claims[1]!.capacityBytes = 100 * GI;
    obs.claims[2]!.capacityBytes = 100 * GI;
    expect(step(obs, 100 * GI)).toEqual({ kind: 'done' });
  });
});
