// Which chaos cells QUEEN_CHAOS_CELLS selects (test/chaos/results.ts).
import { describe, expect, it } from 'vitest';
import { selected } from '../chaos/results.ts';

describe('selecting chaos cells', () => {
  it('`<operation>:crash` is the run without a fault (its steps are the ones to crash at), then each crash cell', () => {
    expect(selected('GrowVolumesRestart', 'none', 'GrowVolumesRestart:crash')).toBe(true);
    expect(selected('GrowVolumesRestart', 'crash@7', 'GrowVolumesRestart:crash')).toBe(true);
    expect(selected('GrowVolumesRestart', 'node-stop', 'GrowVolumesRestart:crash')).toBe(false);
    expect(selected('GrowVolumes', 'none', 'GrowVolumesRestart:crash')).toBe(false);
  });
  it('one crash cell, a fault of the world, every cell of an operation, every cell of all', () => {
    expect(selected('ScaleUp', 'crash@6', 'ScaleUp:crash@6')).toBe(true);
    expect(selected('ScaleUp', 'none', 'ScaleUp:crash@6')).toBe(false);
    expect(selected('RollingUpgrade', 'temporal-restart', 'ScaleUp:crash,RollingUpgrade:temporal-restart')).toBe(true);
    expect(selected('ScaleDown', 'crash@2', 'ScaleDown')).toBe(true);
    expect(selected('ScaleDown', 'voter-kill', '*:voter-kill')).toBe(true);
    expect(selected('ScaleDown', 'crash@2', '')).toBe(true);
  });
});
