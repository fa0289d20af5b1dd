import { describe, expect, it } from 'vitest';
import { observerCheckDue } from '../../watcher/watcher.ts';

// How often the watcher asks Temporal whether a cluster's observer still runs: once a check period,
// at the resync that comes when the period has (nearly) passed, not the one after it.
describe('observerCheckDue', () => {
  it('a watcher alone (a check every resync of 30 s): the next resync checks, though it comes a few ms short of 30 s', () => {
    expect(observerCheckDue(29_990, 30_000, 30_000)).toBe(true);
    expect(observerCheckDue(30_010, 30_000, 30_000)).toBe(true);
  });

  it('an evaluation in between (a change of the cluster) does not check again so soon', () => {
    expect(observerCheckDue(2_000, 30_000, 30_000)).toBe(false);
    expect(observerCheckDue(14_000, 30_000, 30_000)).toBe(false);
  });

  it('beside the worker (a check every 5 min, a resync every 30 s): at the resync near 5 min, not one resync later', () => {
    expect(observerCheckDue(270_000, 300_000, 30_000)).toBe(false);
    expect(observerCheckDue(299_990, 300_000, 30_000)).toBe(true);
  });
});
