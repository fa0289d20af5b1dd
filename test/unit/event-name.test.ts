import { describe, expect, it } from 'vitest';
import { foldedEventName } from '../../activities/kube.ts';

// The name every replica gives the Event that folds the repeats of one thing said, in one fold
// period: how a replica finds another's Event without listing the namespace's Events.
describe('foldedEventName', () => {
  const key = 'uid-1\0Degraded\0Warning\0pod 1 is not running';

  it('is the same for the same thing said in the same period, whoever computes it', () => {
    expect(foldedEventName('queen', key, 2_900_000)).toBe(foldedEventName('queen', key, 2_900_000));
  });

  it('differs with the message, the reason, the object and the period', () => {
    const names = new Set([
      foldedEventName('queen', key, 2_900_000),
      foldedEventName('queen', key.replace('pod 1', 'pod 2'), 2_900_000),
      foldedEventName('queen', key.replace('Degraded', 'Blocked'), 2_900_000),
      foldedEventName('queen', key.replace('uid-1', 'uid-2'), 2_900_000),
      foldedEventName('queen', key, 2_900_001),
    ]);
    expect(names.size).toBe(5);
  });

  it('is a valid object name, led by the cluster name as kubectl shows it', () => {
    const name = foldedEventName('queen-east.a', key, Math.floor(Date.now() / 600_000));
    expect(name.startsWith('queen-east.a.')).toBe(true);
    expect(name).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
    expect(name.length).toBeLessThanOrEqual(253);
  });
});
