// `npm run chaos`: the chaos matrix (each operation with the operator killed after each of its
// steps, and the faults of the world during an upgrade and a scale-up) and a seeded soak, in the
// test bed (a running one with QUEEN_TESTBED=..., else one of its own); then the table: fault ×
// operation → outcome, time to finish, pushes failed, messages lost.
//
//   npm run chaos                         the matrix, then a soak of a random seed (printed)
//   npm run chaos -- --seed N             the soak of seed N again (only the soak)
//   npm run chaos -- --matrix             the matrix only;  --soak [--ops N]: a soak only
//   npm run chaos -- --cells LIST         these cells only, e.g. RollingUpgrade:crash@4,ScaleUp:voter-kill,GrowVolumes
//   npm run chaos -- --sample --seed N    the sample `npm test` runs, for that seed (test/e2e/chaos-sample.test.ts)
//   npm run chaos -- --table FILE         the table of a results file again
//
// The faults of the world kill the test bed's Temporal server and API server and stop its nodes:
// run it on a test bed of its own, not one that other tests use at the same time.
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { isSoak, readResults, summary, table } from './results.ts';
import type { CellResult } from './cell.ts';

const root = new URL('../..', import.meta.url).pathname;
const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(`--${name}`);
const value = (name: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};

function print(file: string): void {
  const all = readResults(file);
  const cells = all.filter((r): r is CellResult => !isSoak(r));
  if (cells.length) {
    console.log(`\nchaos matrix, cell by cell (${file}):\n`);
    console.log(table(cells));
    console.log('\nchaos matrix, summed up:\n');
    console.log(summary(cells));
  }
  for (const r of all.filter(isSoak)) {
    console.log(`\nsoak, seed ${r.seed} (npm run chaos -- --seed ${r.seed}): ${r.steps.length} operations in ${r.seconds} s, pushes failed ${r.pushesFailed}/${r.pushes}, messages lost ${r.lost}`);
    for (const st of r.steps) console.log(`  ${st.what}: ${st.outcome}${st.seconds === null ? '' : ` in ${st.seconds} s`}${st.notes.length ? ` (${st.notes.join('; ')})` : ''}`);
    console.log(r.violations.length ? `  FAILED: ${r.violations.join('; ')}` : '  every promise held');
  }
}

const tableOf = value('table');
if (tableOf) {
  print(tableOf);
  process.exit(0);
}

const seed = value('seed');
const sample = flag('sample');
const soakOnly = flag('soak') || (seed !== undefined && !flag('matrix') && !sample);
const matrixOnly = flag('matrix') || value('cells') !== undefined;
mkdirSync(join(root, '.cache'), { recursive: true });
const file = join(root, '.cache', `chaos-${new Date().toISOString().replace(/[:.]/g, '-')}.jsonl`);
const env: NodeJS.ProcessEnv = { ...process.env, QUEEN_CHAOS_RESULTS: file };
if (seed !== undefined) env.QUEEN_CHAOS_SEED = seed;
if (value('ops')) env.QUEEN_CHAOS_SOAK_OPS = value('ops');
if (value('cells')) env.QUEEN_CHAOS_CELLS = value('cells');
if (matrixOnly) env.QUEEN_CHAOS_SOAK = '0';

const files = sample
  ? ['test/e2e/chaos-sample.test.ts']
  : soakOnly
    ? ['test/chaos/soak.chaos.ts']
    : matrixOnly
      ? ['test/chaos/matrix.chaos.ts']
      : ['test/chaos/matrix.chaos.ts', 'test/chaos/soak.chaos.ts'];
const started = Date.now();
const r = spawnSync('vitest', ['run', '--project', sample ? 'testbed' : 'chaos', ...files], { cwd: root, stdio: 'inherit', env });
print(file);
console.log(`\nchaos: ${r.status === 0 ? 'PASSED' : 'FAILED'} in ${Math.round((Date.now() - started) / 60_000)} min; results in ${file}`);
process.exit(r.status ?? 1);
