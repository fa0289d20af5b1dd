// `npm test`: type checking, then every test (unit, simulator, test bed, workflows, end-to-end),
// then one closing line `N passed, N failed` (type checking counts as one test).
// Arguments go to vitest, e.g. `npm test -- --project unit`.
//
// The `unit` project runs first and alone, then the `testbed` project (two scenarios at a time,
// then those that act on a whole node, alone), then `install` (the
// README's cluster-wide install, in a test bed of its own): the simulator's own tests
// time a protocol of 300 ms elections, and the end-to-end scenarios put a control plane, a Temporal
// server and clusters of simulated nodes on the same two cores. Run side by side, each slows the
// other down in ways that say nothing about the code under test.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
mkdirSync(join(root, '.cache'), { recursive: true });

const started = Date.now();
console.log('type checking (tsc)...');
const tsc = spawnSync('tsc', ['-p', 'tsconfig.json'], { cwd: root, stdio: 'inherit' });
const typesOk = tsc.status === 0;
console.log(typesOk ? 'type checking passed' : 'type checking FAILED');

let passed = typesOk ? 1 : 0;
let failed = typesOk ? 0 : 1;
let skipped = 0;
let exitOk = typesOk;

/** One vitest run; its counts are added to the totals. */
function runVitest(label: string, args: string[]): void {
  const out = join(root, '.cache', `test-results${label ? `-${label}` : ''}.json`);
  rmSync(out, { force: true });
  const vitest = spawnSync('vitest', ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${out}`, ...args], {
    cwd: root,
    stdio: 'inherit',
  });
  if (vitest.status !== 0) exitOk = false;
  try {
    const report = JSON.parse(readFileSync(out, 'utf8')) as {
      numPassedTests: number;
      numFailedTests: number;
      numPendingTests: number;
      numTodoTests: number;
      numFailedTestSuites: number;
    };
    passed += report.numPassedTests;
    failed += report.numFailedTests + (report.numFailedTests === 0 && vitest.status !== 0 ? Math.max(1, report.numFailedTestSuites) : 0);
    skipped += report.numPendingTests + report.numTodoTests;
  } catch {
    failed += 1;
    console.log(`vitest${label ? ` (${label})` : ''} wrote no report: it did not run to the end`);
  }
}

/** Scenarios that act on a test bed node every other scenario's pods may run on. */
const ALONE = ['test/testbed/nodes.test.ts', 'test/e2e/upgrade-drain.test.ts'];

// The benchmarks are not tests: `npm run bench` runs them.
const args = process.argv.slice(2);
if (args.some((a) => a.startsWith('--project'))) {
  runVitest('', args);
} else {
  // A file filter may match files of one project only: the other then has nothing to run.
  const filtered = args.length > 0 ? ['--passWithNoTests'] : [];
  runVitest('unit', ['--project', 'unit', ...filtered, ...args]);
  // The scenarios run two at a time: most of their time is spent waiting for pods, elections and
  // gates, not computing. Those that act on a whole test bed node (stop it, cordon or drain it)
  // would disrupt the scenario beside them: they run afterwards, alone.
  runVitest('testbed', ['--project', 'testbed', '--maxWorkers=2', ...ALONE.flatMap((f) => ['--exclude', f]), ...filtered, ...args]);
  const filters = args.filter((a) => !a.startsWith('-'));
  const alone = filters.length > 0 ? ALONE.filter((f) => filters.some((x) => f.includes(x))) : ALONE;
  if (alone.length > 0) runVitest('testbed-alone', ['--project', 'testbed', '--maxWorkers=1', ...args.filter((a) => a.startsWith('-')), ...alone]);
  // The cluster-wide install, in a test bed of its own (it would act on the other scenarios' clusters).
  runVitest('install', ['--project', 'install', ...filtered, ...args]);
}

console.log(`tests took ${Math.round((Date.now() - started) / 1000)}s`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 || !exitOk ? 1 : 0);
