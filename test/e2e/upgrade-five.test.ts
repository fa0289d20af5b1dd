// e2e `upgrade-five`: five voters go from 2.6.0 to 2.6.1 under load (test/e2e/upgrade-scenario.ts says
// what is checked; `upgrade` does the same with three).
import { afterEach, it } from 'vitest';
import type { Scenario } from './harness.ts';
import { upgradeUnderLoad } from './upgrade-scenario.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('upgrade-five: 5 voters, 2.6.0 to 2.6.1 under load', () => upgradeUnderLoad(5, (made) => (s = made)));
