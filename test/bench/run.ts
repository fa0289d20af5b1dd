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
const r = spawnSync('vitest', ['run', '--project', 'bench', ...names.map((n) => `test/bench/${n}.bench.ts`)], {
  cwd: join(here, '..', '..'),
  stdio: 'inherit',
});
process.exit(r.status ?? 1);
