// `npm run chaos` (test/chaos/run.ts): the soak. QUEEN_CHAOS_SEED gives the seed (printed either
// way: `npm run chaos -- --seed N` runs that one again), QUEEN_CHAOS_SOAK_MINUTES how long it goes
// on (operations start while time is left), or else QUEEN_CHAOS_SOAK_OPS the number of operations.
import { expect, it } from 'vitest';
import { record } from './results.ts';
import { soak } from './soak.ts';

const seed = Number(process.env.QUEEN_CHAOS_SEED ?? Math.floor(Math.random() * 1_000_000));
const operations = Number(process.env.QUEEN_CHAOS_SOAK_OPS ?? 8);
const minutes = process.env.QUEEN_CHAOS_SOAK_MINUTES ? Number(process.env.QUEEN_CHAOS_SOAK_MINUTES) : undefined;
const length = minutes ? `${minutes} min of` : String(operations);

it.skipIf(process.env.QUEEN_CHAOS_SOAK === '0')(`soak: ${length} random operations and faults, seed ${seed}`, async () => {
  const r = await soak({ seed, operations, minutes });
  record(r);
  for (const st of r.steps) console.log(`  ${st.what}: ${st.outcome}${st.seconds === null ? '' : ` in ${st.seconds} s`}${st.notes.length ? ` (${st.notes.join('; ')})` : ''}`);
  expect(r.violations, `seed ${seed}: rerun with npm run chaos -- --seed ${seed}`).toEqual([]);
});
