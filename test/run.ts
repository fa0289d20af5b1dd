// `npm test`: type checking, then every test (unit, simulator, test bed, workflows, end-to-end),
// then one closing line `N passed, N failed` (type checking counts as one test).
// Arguments go to vitest, e.g. `npm test -- --project unit`.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const out = join(root, '.cache', 'test-results.json');
mkdirSync(join(root, '.cache'), { recursive: true });
rmSync(out, { force: true });

const started = Date.now();
console.log('type checking (tsc)...');
const tsc = spawnSync('tsc', ['-p', 'tsconfig.json'], { cwd: root, stdio: 'inherit' });
const typesOk = tsc.status === 0;
console.log(typesOk ? 'type checking passed' : 'type checking FAILED');

// The benchmarks are not tests: `npm run bench` runs them.
const args = process.argv.slice(2);
const projects = args.some((a) => a.startsWith('--project')) ? [] : ['--project', 'unit', '--project', 'testbed'];
const vitest = spawnSync('vitest', ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${out}`, ...projects, ...args], {
  cwd: root,
  stdio: 'inherit',
});

let passed = typesOk ? 1 : 0;
let failed = typesOk ? 0 : 1;
let skipped = 0;
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
  console.log('vitest wrote no report: it did not run to the end');
}
console.log(`tests took ${Math.round((Date.now() - started) / 1000)}s`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 || vitest.status !== 0 ? 1 : 0);
