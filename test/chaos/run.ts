// `npm run chaos`: the chaos matrix (each operation with the operator killed after each of its
// steps, and the faults of the world during an upgrade and a scale-up) and a seeded soak, in the
// test bed (a running one with QUEEN_TESTBED=..., else one of its own); then the tables: fault ×
// operation → outcome, time to finish, pushes failed, messages lost; and the soak's operations.
// They are Markdown, headed by the commit they ran on, ready to go into the docs as printed.
//
//   npm run chaos                         the matrix, then a soak of a random seed for 60 minutes
//   npm run chaos -- --soak-minutes N     the same with a soak of N minutes (QUEEN_CHAOS_SOAK_MINUTES)
//   npm run chaos -- --seed N             the soak of seed N again (only the soak; 8 operations, or --soak-minutes)
//   npm run chaos -- --matrix             the matrix only;  --soak [--ops N | --soak-minutes N]: a soak only
//   npm run chaos -- --cells LIST         these cells only, e.g. RollingUpgrade:crash@4,ScaleUp:voter-kill,GrowVolumes
//   npm run chaos -- --sample --seed N    the sample `npm test` runs, for that seed (test/e2e/chaos-sample.test.ts)
//   npm run chaos -- --table FILE         the tables of a results file again
//
// The faults of the world kill the test bed's Temporal server and API server and stop its nodes:
// run it on a test bed of its own, not one that other tests use at the same time.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isSoak, markdown, readResults, summary, table, type SoakResult } from './results.ts';
import type { CellResult } from './cell.ts';

const root = new URL('../..', import.meta.url).pathname;
const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(`--${name}`);
const value = (name: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};

/** What a run was: the commit it ran on, when, and what was asked (written beside its results). */
interface RunInfo {
  commit: string;
  /** Files changed and not committed when it began (a run of those is not the commit's). */
  uncommitted: boolean;
  startedAt: string;
  args: string[];
  timeFactor: string;
  soakMinutes?: number;
}

const git = (...args: string[]) => {
  try {
    return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
};

/** The test bed's time factor: the running one's (QUEEN_TESTBED), or the one the run starts (test/testbed/global-setup.ts). */
function testbedTimeFactor(): string {
  const running = process.env.QUEEN_TESTBED;
  if (!running) return process.env.QUEEN_TESTBED_TIME_FACTOR ?? '0.2';
  try {
    return String((JSON.parse(readFileSync(running, 'utf8')) as { timeFactor?: number }).timeFactor ?? 'unknown');
  } catch {
    return 'unknown';
  }
}

const infoFile = (file: string) => file.replace(/\.jsonl$/, '.run.json');

function print(file: string): void {
  const info: RunInfo | null = existsSync(infoFile(file)) ? JSON.parse(readFileSync(infoFile(file), 'utf8')) : null;
  const head = info
    ? `commit ${info.commit.slice(0, 12)}${info.uncommitted ? ' with uncommitted changes' : ''}, begun ${info.startedAt}, test bed at time factor ${info.timeFactor} (npm run chaos${info.args.length ? ` -- ${info.args.join(' ')}` : ''})`
    : file;
  const all = readResults(file);
  const cells = all.filter((r): r is CellResult => !isSoak(r));
  if (cells.length) {
    console.log(`\nchaos matrix, cell by cell: ${head}\n`);
    console.log(table(cells));
    console.log(`\nchaos matrix, summed up: ${head}\n`);
    console.log(summary(cells));
  }
  for (const r of all.filter(isSoak)) {
    console.log(`\nsoak, seed ${r.seed}${r.length ? `, asked for ${r.length}` : ''}: ${head}`);
    console.log(`${r.steps.filter(isOperation).length} operations in ${Math.round(r.seconds / 60)} min (${r.seconds} s), pushes failed ${r.pushesFailed}/${r.pushes}, messages lost ${r.lost}; ${r.violations.length ? `FAILED: ${r.violations.join('; ')}` : 'every promise held'}\n`);
    console.log(soakTable(r));
  }
}

/** A soak's step that is one of its operations (the others say what was checked at its end). */
const isOperation = (st: SoakResult['steps'][number]) => /^(upgrade|scale|grow|replace) /.test(st.what);

/** The soak's operations, one line each: what was asked and how, the fault, the outcome, the time, what was seen. */
function soakTable(r: SoakResult): string {
  const rows = r.steps.map((st, i) => [
    isOperation(st) ? String(i + 1) : '',
    st.what,
    st.outcome,
    st.seconds === null ? '—' : `${st.seconds} s`,
    st.notes.filter((n) => !n.startsWith('membership changes:')).join('; ') || '—',
    st.notes.find((n) => n.startsWith('membership changes:'))?.replace('membership changes: ', '') ?? '—',
  ]);
  return markdown(['#', 'operation, how it started, fault', 'outcome', 'time', 'what happened', 'Raft log: membership changes'], rows);
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
// The soak's length: minutes when asked, or a number of operations; the whole run's soak goes on for an hour.
const minutesAsked = value('soak-minutes') ?? process.env.QUEEN_CHAOS_SOAK_MINUTES;
if (minutesAsked !== undefined && !(Number(minutesAsked) > 0)) {
  console.error(`--soak-minutes: "${minutesAsked}" is not a number of minutes`);
  process.exit(2);
}
const soakMinutes = minutesAsked !== undefined ? Number(minutesAsked) : !soakOnly && !matrixOnly && !sample && !value('ops') ? 60 : undefined;
mkdirSync(join(root, '.cache'), { recursive: true });
const file = join(root, '.cache', `chaos-${new Date().toISOString().replace(/[:.]/g, '-')}.jsonl`);
const env: NodeJS.ProcessEnv = { ...process.env, QUEEN_CHAOS_RESULTS: file };
if (seed !== undefined) env.QUEEN_CHAOS_SEED = seed;
if (value('ops')) env.QUEEN_CHAOS_SOAK_OPS = value('ops');
if (soakMinutes !== undefined) env.QUEEN_CHAOS_SOAK_MINUTES = String(soakMinutes);
if (value('cells')) env.QUEEN_CHAOS_CELLS = value('cells');
if (matrixOnly) env.QUEEN_CHAOS_SOAK = '0';
const info: RunInfo = {
  commit: git('rev-parse', 'HEAD') || 'unknown (not a git checkout)',
  uncommitted: git('status', '--porcelain', '--untracked-files=no') !== '',
  startedAt: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
  args: argv,
  timeFactor: testbedTimeFactor(),
  ...(soakMinutes !== undefined ? { soakMinutes } : {}),
};
writeFileSync(infoFile(file), JSON.stringify(info, null, 1));

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
console.log(`\nchaos: ${r.status === 0 ? 'PASSED' : 'FAILED'} in ${Math.round((Date.now() - started) / 60_000)} min on commit ${info.commit.slice(0, 12)}${info.uncommitted ? ' with uncommitted changes' : ''}; results in ${file}`);
process.exit(r.status ?? 1);
