// `npm run e2e -- <name> [<name>...]`: runs end-to-end scenarios (test/e2e/<name>.test.ts) in the
// test bed and ends with one summary line. Without a name it lists them.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ALONE, CLUSTER_WIDE } from '../projects.ts';

const here = new URL('.', import.meta.url).pathname;
const root = join(here, '..', '..');
const all = readdirSync(here)
  .filter((f) => f.endsWith('.test.ts'))
  .map((f) => f.replace(/\.test\.ts$/, ''))
  .sort();
const names = process.argv.slice(2);
if (names.length === 0) {
  console.log(`usage: npm run e2e -- <scenario> [<scenario>...]\nscenarios: ${all.join(', ')}`);
  process.exit(2);
}
for (const n of names) {
  if (!all.includes(n)) {
    console.error(`no scenario ${n}; there are: ${all.join(', ')}`);
    process.exit(2);
  }
}
const out = join(root, '.cache', 'e2e-results.json');
rmSync(out, { force: true });
const started = Date.now();
// install and helm are the `cluster-wide` project's (a test bed of their own), upgrade-drain the
// `testbed-alone` project's (it drains a node); the others are `testbed`'s.
const fileOf = (n: string) => `test/e2e/${n}.test.ts`;
const projectOf = (n: string) => (CLUSTER_WIDE.includes(fileOf(n)) ? 'cluster-wide' : ALONE.includes(fileOf(n)) ? 'testbed-alone' : 'testbed');
const projects = [...new Set(names.map(projectOf))].flatMap((p) => ['--project', p]);
const r = spawnSync(
  'vitest',
  ['run', ...projects, '--reporter=default', '--reporter=json', `--outputFile.json=${out}`, ...names.map(fileOf)],
  { cwd: root, stdio: 'inherit' },
);
let summary = 'did not run to the end';
try {
  const j = JSON.parse(readFileSync(out, 'utf8')) as { numPassedTests: number; numFailedTests: number };
  summary = `${j.numPassedTests} passed, ${j.numFailedTests} failed`;
} catch {
  // no report
}
console.log(`e2e ${names.join(' ')}: ${r.status === 0 ? 'PASSED' : 'FAILED'} (${summary}) in ${Math.round((Date.now() - started) / 1000)}s`);
process.exit(r.status ?? 1);
