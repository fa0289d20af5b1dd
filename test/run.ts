// `npm test`: type checking, then every test (unit, simulator, test bed, workflows, end-to-end),
// then one closing line `N passed, N failed` (type checking counts as one test).
// Arguments go to vitest, e.g. `npm test -- --project unit`.
//
// The `unit` project runs first and alone, then the `testbed` project (four scenarios at a time, one of them heavy),
// then those that act on a whole node one at a time beside `cluster-wide` (the README's cluster-wide
// installs, plain and with Helm, each in a test bed of its own): the simulator's own tests
// time a protocol of 300 ms elections, and the end-to-end scenarios put a control plane, a Temporal
// server and clusters of simulated nodes on the same two cores. Run side by side, each slows the
// other down in ways that say nothing about the code under test.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CLUSTER_WIDE } from './projects.ts';
import { longDraw } from './long.ts';

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

/** One vitest run; its counts are added to the totals. With `quiet`, its output is kept and printed once it ends. */
async function runVitest(label: string, args: string[], quiet = false): Promise<void> {
  const out = join(root, '.cache', `test-results${label ? `-${label}` : ''}.json`);
  rmSync(out, { force: true });
  const child = spawn('vitest', ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${out}`, ...args], {
    cwd: root,
    stdio: quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit',
  });
  const kept: Buffer[] = [];
  child.stdout?.on('data', (b: Buffer) => kept.push(b));
  child.stderr?.on('data', (b: Buffer) => kept.push(b));
  const status = await new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  if (quiet) process.stdout.write(Buffer.concat(kept));
  if (status !== 0) exitOk = false;
  try {
    const report = JSON.parse(readFileSync(out, 'utf8')) as {
      numPassedTests: number;
      numFailedTests: number;
      numPendingTests: number;
      numTodoTests: number;
      numFailedTestSuites: number;
    };
    passed += report.numPassedTests;
    failed += report.numFailedTests + (report.numFailedTests === 0 && status !== 0 ? Math.max(1, report.numFailedTestSuites) : 0);
    skipped += report.numPendingTests + report.numTodoTests;
  } catch {
    failed += 1;
    console.log(`vitest${label ? ` (${label})` : ''} wrote no report: it did not run to the end`);
  }
}

// The benchmarks are not tests: `npm run bench` runs them.
const args = process.argv.slice(2);
if (args.some((a) => a.startsWith('--project'))) {
  await runVitest('', args);
} else {
  // A file filter may match files of one project only: the other then has nothing to run.
  const filtered = args.length > 0 ? ['--passWithNoTests'] : [];
  // The simulator's own tests run in both modes: a process per node (`unit`) and a broker fleet (`unit-fleet`).
  await runVitest('unit', ['--project', 'unit', '--project', 'unit-fleet', '--maxWorkers=2', ...filtered, ...args]);
  // The scenarios run four at a time: most of their time is spent waiting for pods, elections and
  // gates, not computing (with three, a quarter of the two cores stayed idle), and those that push
  // 200 messages a second take one slot at a time (test/heavy.ts). Those that act on a whole test bed node (stop it, cordon or drain it)
  // would disrupt the scenario beside them: they run afterwards, one at a time (vitest.config.ts),
  // beside the cluster-wide installs, which have test beds of their own (they would act on the other
  // scenarios' clusters); their output follows once they end.
  // Two of the long scenarios, drawn from the commit (test/long.ts); a file filter runs what it names.
  const long = longDraw();
  if (args.length === 0) {
    // vitest.config.ts leaves these out of the testbed project.
    process.env.QUEEN_LEAVE_OUT = long.left.map((n) => `test/e2e/${n}.test.ts`).join(',');
    console.log(`long scenarios: ${long.run.join(' and ')} (drawn from ${long.from}); the others: npm run e2e -- ${long.left.join(' ')}`);
  }
  await runVitest('testbed', ['--project', 'testbed', '--maxWorkers=4', ...filtered, ...args]);
  delete process.env.QUEEN_LEAVE_OUT;
  // The two cluster-wide installs each start a test bed of their own (a vitest run each), side by
  // side: one after the other in one test bed they took 300 s after the test bed stage, where the
  // scenarios that run alone take 130 s.
  const clusterWide = args.length === 0 ? CLUSTER_WIDE.map((file) => [file]) : [args];
  await Promise.all([
    runVitest('testbed-alone', ['--project', 'testbed-alone', '--maxWorkers=1', ...filtered, ...args]),
    ...clusterWide.map((files, i) =>
      runVitest(clusterWide.length > 1 ? `cluster-wide-${i + 1}` : 'cluster-wide', ['--project', 'cluster-wide', ...filtered, ...files], true),
    ),
  ]);
}

console.log(`tests took ${Math.round((Date.now() - started) / 1000)}s`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 || !exitOk ? 1 : 0);
