// `npm run bench -- <name>`: runs a benchmark (test/bench/<name>.bench.ts) in the test bed; it
// prints its measures against their floor or baseline. Without a name it lists them.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const here = new URL('.', import.meta.url).pathname;
const all = readdirSync(here).filter((f) => f.endsWith('.bench.ts')).map((f) => f.replace(/\.bench\.ts$/, ''));
const names = process.argv.slice(2);
if (names.length === 0 || names.some((n) => !all.includes(n))) {
  console.log(`usage: npm run bench -- <name>\nbenchmarks: ${all.join(', ')}`);
  process.exit(2);
}
// The scale benchmark's 600 pods need room on the test bed's five nodes, and real timings: probes
// scaled down to a fifth would be five times as many, which loads the test bed, not the operator.
const env = { ...process.env };
if (names.includes('scale')) {
  env.QUEEN_TESTBED_MAX_PODS ??= '250';
  env.QUEEN_TESTBED_TIME_FACTOR ??= '1';
}
const r = spawnSync('vitest', ['run', '--project', 'bench', ...names.map((n) => `test/bench/${n}.bench.ts`)], {
  cwd: join(here, '..', '..'),
  stdio: 'inherit',
  env,
});
process.exit(r.status ?? 1);
