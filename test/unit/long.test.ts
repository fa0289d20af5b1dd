// The long scenarios npm test draws (test/long.ts): two a commit, all of them over successive
// seeds, the same two for the same seed, and each one a scenario that exists.
import { existsSync } from 'node:fs';
import { expect, it } from 'vitest';
import { drawLong, LONG_DRAWN, LONG_SCENARIOS } from '../long.ts';

it('draws two different long scenarios a seed, the same for the same seed, all of them over seven seeds', () => {
  const seen = new Set<string>();
  for (let seed = 4_000_000_000; seed < 4_000_000_007; seed++) {
    const { run, left } = drawLong(seed);
    expect(new Set(run).size).toBe(LONG_DRAWN);
    expect([...run, ...left].sort()).toEqual([...LONG_SCENARIOS].sort());
    expect(drawLong(seed)).toEqual({ run, left });
    for (const n of run) seen.add(n);
  }
  expect([...seen].sort()).toEqual([...LONG_SCENARIOS].sort());
});

it('names scenarios that exist', () => {
  for (const n of LONG_SCENARIOS) expect(existsSync(new URL(`../e2e/${n}.test.ts`, import.meta.url)), n).toBe(true);
});
