// The long scenarios: each takes three to six minutes of the test bed (five voters under 200
// messages a second, twenty clusters at once, a backup schedule's minute ticks, a canary failed
// and held across every operator pod deleted by force, history sizes measured over minutes, a
// call outlasting its timeout, a door that cannot be crossed back). All of them in every `npm test`
// would take it past 35 minutes on two cores, so `npm test` runs two of them, drawn from the
// commit it runs on (the chaos sample's seed, test/chaos/seed.ts): successive commits run all of
// them, the same commit the same two. `npm run e2e -- <name>` runs any of them; `npm run e2e --
// upgrade-five long-call ...` all.
import { sampleSeed, type SampleSeed } from './chaos/seed.ts';

export const LONG_SCENARIOS: readonly string[] = [
  'upgrade-five',
  'downgrade',
  'long-call',
  'backup',
  'waits-restart',
  'waits-history',
  'scale-clusters',
];

/** How many of them one `npm test` runs. */
export const LONG_DRAWN = 2;

/** The long scenarios one `npm test` runs, and those it leaves out, for this seed. */
export function drawLong(seed: number): { run: string[]; left: string[] } {
  const first = seed % LONG_SCENARIOS.length;
  const run = Array.from({ length: LONG_DRAWN }, (_, i) => LONG_SCENARIOS[(first + i * 3) % LONG_SCENARIOS.length]!);
  return { run, left: LONG_SCENARIOS.filter((n) => !run.includes(n)) };
}

/** The draw of this checkout (QUEEN_CHAOS_SEED gives another). */
export function longDraw(): SampleSeed & { run: string[]; left: string[] } {
  const s = sampleSeed();
  return { ...s, ...drawLong(s.seed) };
}
