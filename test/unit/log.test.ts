// The operator's log as a person and a pod see it: on a terminal (`npm start`) readable lines from
// pino-pretty; on a pipe (a pod's stdout goes to the container runtime) one JSON object a line.
// main.ts runs as a process, its stdout a pseudo-terminal made by util-linux's `script`, or a pipe.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const MAIN = fileURLToPath(new URL('../../main.ts', import.meta.url));
// A kubeconfig that does not exist: the operator says so at once, in its log, and exits 2.
const ARGS = ['--kubeconfig=/nonexistent/kubeconfig', '--health-port=0', '--metrics-port=0'];
const LINE = 'the kubeconfig /nonexistent/kubeconfig does not exist';

/** What main.ts writes to stdout, on a terminal (through `script`) or on a pipe. */
function run(terminal: boolean, extra: string[] = []): string {
  const argv = [process.execPath, MAIN, ...ARGS, ...extra];
  const r = terminal
    ? spawnSync('script', ['-qec', argv.map((a) => `'${a}'`).join(' '), '/dev/null'], { encoding: 'utf8', env: { ...process.env, TERM: 'xterm' } })
    : spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
  if (r.error) throw new Error(`${terminal ? "util-linux's script (for a terminal)" : 'node'} could not run: ${r.error.message}`);
  expect(r.status).toBe(2);
  // No colours, no carriage returns of the terminal.
  return r.stdout.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '');
}

describe('the log', () => {
  it('is readable on a terminal: the time, the level and the message on one line', () => {
    const out = run(true).trim();
    expect(out).toMatch(new RegExp(`^\\[\\d\\d:\\d\\d:\\d\\d\\] ERROR: ${LINE}$`));
  });

  it('is JSON on a pipe, as in a pod', () => {
    const line = JSON.parse(run(false).trim()) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 50, component: 'queen-operator', msg: LINE });
  });

  it('follows --log-format when it is given', () => {
    expect(JSON.parse(run(true, ['--log-format=json']).trim())).toMatchObject({ msg: LINE });
    expect(run(false, ['--log-format=pretty']).trim()).toMatch(new RegExp(`ERROR: ${LINE}$`));
  });
});
