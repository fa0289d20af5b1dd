// The alerting rules (deploy/alerts.yaml, the chart's PrometheusRule rendered by npm run generate),
// each tested with Prometheus's own `promtool test rules`: series as two operator replicas expose
// them (every replica reports every cluster), and for each alert the moment it must not fire yet
// and the moment it fires, with its labels and words. promtool comes with Debian's `prometheus`
// package, which .ci/run installs: without it this test fails, saying so.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';

const RULES = fileURLToPath(new URL('../../deploy/alerts.yaml', import.meta.url));

function promtool(args: string[]): { code: number; out: string } {
  const r = spawnSync('promtool', args, { encoding: 'utf8' });
  if (r.error) throw new Error(`promtool could not run (${r.error.message}): it comes with Debian's prometheus package (apt-get install prometheus; .ci/run installs it)`);
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

interface Case {
  series: Record<string, string>;
  /** eval time → the alerts expected then (labels, and annotations when given). */
  expect: Array<[string, Array<{ exp_labels: Record<string, string>; exp_annotations?: Record<string, string> }>]>;
}

/** Runs one alert's cases through `promtool test rules` (a minute between samples). */
function test(alert: string, cases: Case[]): void {
  const dir = mkdtempSync(join(tmpdir(), 'queen-alerts-'));
  const file = join(dir, 'test.yaml');
  writeFileSync(
    file,
    stringify({
      rule_files: [RULES],
      evaluation_interval: '1m',
      tests: cases.map((c) => ({
        interval: '1m',
        input_series: Object.entries(c.series).map(([series, values]) => ({ series, values })),
        alert_rule_test: c.expect.map(([eval_time, exp_alerts]) => ({ eval_time, alertname: alert, exp_alerts })),
      })),
    }),
  );
  const r = promtool(['test', 'rules', file]);
  expect(r.out, r.out).toMatch(/SUCCESS/);
  expect(r.code).toBe(0);
}

const c = (name = 'queen', namespace = 'queen') => `namespace="${namespace}",name="${name}"`;

/** What each alert says, for a cluster queen/<name> (the rules' summary and description, as Prometheus fills them in). */
const words = {
  QueenClusterDegraded: (name = 'queen') => ({
    summary: `Queen cluster queen/${name} is Degraded`,
    description: `A pod has been down or a voter behind for 15m. kubectl -n queen get queencluster ${name} -o wide says which.`,
  }),
  QueenClusterBlocked: (name = 'queen') => ({
    summary: `Queen cluster queen/${name} is Blocked: a person has to decide`,
    description: `The operator waits for a person: kubectl -n queen get queencluster ${name} -o wide says what to do.`,
  }),
  QueenOperationWaitingForWorker: (name = 'queen') => ({
    summary: `RollingUpgrade of queen/${name} waits for a worker`,
    description: `No operator worker takes up its next step: are the operator's pods running, on the task queue the watcher uses? kubectl -n queen get queencluster ${name} -o wide names the task queue.`,
  }),
  QueenStepFailing: (step?: string) => ({
    summary: 'A step of queen/queen keeps failing',
    description: `A step of the running operation${step ? ` (${step})` : ''} fails and is tried again, or its attempts time out: kubectl -n queen describe queencluster queen shows its StepFailing Events, with the error.`,
  }),
  QueenClusterNotObserved: (name: string) => ({
    summary: `Queen cluster queen/${name} has no observer`,
    description: `No operator replica observes it: its status, COMMITS and phase are not kept up to date. Look at the operator's log and at its observer, temporal workflow describe --workflow-id queencluster-observer/queen/${name}.`,
  }),
  QueenOperatorDown: () => ({
    summary: 'No ready Queen operator replica',
    description: 'No replica of the operator is ready (or none is scraped): no operation moves, and no cluster is observed.',
  }),
};

describe('the alerting rules', () => {
  it('are valid Prometheus rules', () => {
    const r = promtool(['check', 'rules', RULES]);
    expect(r.out).toMatch(/SUCCESS: 9 rules found/);
  });

  it('QueenClusterNotCommitting: COMMITS false for 2 minutes, as every replica sees it; resolved once a write commits', () => {
    test('QueenClusterNotCommitting', [
      {
        series: { [`queen_cluster_commits{${c()},pod="op-0"}`]: '1 0 0 0 0 1', [`queen_cluster_commits{${c()},pod="op-1"}`]: '1 0 0 0 0 1' },
        expect: [
          ['2m', []],
          [
            '3m',
            [
              {
                exp_labels: { severity: 'critical', namespace: 'queen', name: 'queen' },
                exp_annotations: {
                  summary: 'Queen cluster queen/queen does not commit writes',
                  description:
                    "COMMITS has been false for 2m: the operator's write probe does not commit through any pod, so clients cannot push. kubectl -n queen get queencluster queen -o wide says why (status.lastProbeError).",
                },
              },
            ],
          ],
          ['5m', []],
        ],
      },
      // One replica still sees it commit (its watch behind): not yet. A cluster never probed (no sample): never.
      { series: { [`queen_cluster_commits{${c()},pod="op-0"}`]: '0x5', [`queen_cluster_commits{${c()},pod="op-1"}`]: '1x5', [`queen_cluster_phase{${c('new')},phase="Forming"}`]: '1x5' }, expect: [['4m', []]] },
    ]);
  });

  it('QueenClusterDegraded and QueenClusterBlocked: the phase held for 15 minutes', () => {
    const phase = (p: string, values: string) => ({ [`queen_cluster_phase{${c()},phase="${p}",pod="op-0"}`]: values });
    test('QueenClusterDegraded', [
      { series: phase('Degraded', '0 1x20'), expect: [['15m', []], ['16m', [{ exp_labels: { severity: 'warning', namespace: 'queen', name: 'queen' }, exp_annotations: words.QueenClusterDegraded() }]]] },
      { series: { ...phase('Degraded', '0 1x10 0x10'), ...phase('Ready', '1 0x10 1x10') }, expect: [['20m', []]] },
    ]);
    test('QueenClusterBlocked', [{ series: phase('Blocked', '1x20'), expect: [['14m', []], ['15m', [{ exp_labels: { severity: 'warning', namespace: 'queen', name: 'queen' }, exp_annotations: words.QueenClusterBlocked() }]]] }]);
  });

  it('QueenOperationWaitingForWorker: an operation held by the gate worker-polling for 5 minutes', () => {
    test('QueenOperationWaitingForWorker', [
      {
        series: {
          [`queen_cluster_operation{${c()},type="RollingUpgrade",gate="worker-polling",pod="op-0"}`]: '1x10',
          [`queen_cluster_operation{${c('other')},type="RollingUpgrade",gate="pod-ready",pod="op-0"}`]: '1x10',
        },
        expect: [['4m', []], ['5m', [{ exp_labels: { severity: 'warning', namespace: 'queen', name: 'queen', type: 'RollingUpgrade' }, exp_annotations: words.QueenOperationWaitingForWorker() }]]],
      },
    ]);
  });

  it('QueenOperationWaitingForAPerson: an operation parked for a person longer than a day, by gate; not one parked for less', () => {
    const parked = (since: number, name = 'queen') => ({ [`queen_operation_waiting_for_person_since_seconds{${c(name)},type="RollingUpgrade",gate="approved",pod="op-0"}`]: `${since}x1500` });
    const fires = {
      exp_labels: { severity: 'warning', namespace: 'queen', name: 'queen', type: 'RollingUpgrade', gate: 'approved' },
      exp_annotations: {
        summary: 'RollingUpgrade of queen/queen has waited for a person at approved for long',
        description:
          'It has waited more than 86400 seconds for someone to act (an approval, the end of a pause, a decision about a failed version, a Blocked hold). It holds no operator worker meanwhile. kubectl -n queen get queencluster queen -o wide says what it waits for.',
      },
    };
    // Parked at the start (time 0): quiet for a day, then it fires; parked an hour in, it fires an hour later.
    test('QueenOperationWaitingForAPerson', [
      { series: parked(0), expect: [['1439m', []], ['1441m', [fires]]] },
      { series: parked(3600), expect: [['1441m', []], ['1501m', [fires]]] },
    ]);
  });

  it('QueenStepFailing: a step that failed three times within 15 minutes, or whose attempts time out; not one that failed once or twice', () => {
    const failures = (values: string, pod = 'op-0') => ({ [`queen_step_failures_total{${c()},step="applyPodTemplate",pod="${pod}"}`]: values });
    test('QueenStepFailing', [
      {
        series: failures('1 2 3 3'),
        expect: [
          ['1m', []],
          [
            '2m',
            [
              {
                exp_labels: { severity: 'warning', namespace: 'queen', name: 'queen', step: 'applyPodTemplate' },
                exp_annotations: words.QueenStepFailing('applyPodTemplate'),
              },
            ],
          ],
        ],
      },
      { series: failures('1 2 2 2 2 2'), expect: [['5m', []]] },
      // Over after the window.
      { series: failures('1 2 3 3x20'), expect: [['20m', []]] },
      { series: { [`queen_cluster_operation{${c()},type="ScaleVoters",gate="step-succeeds",pod="op-1"}`]: '1x3' }, expect: [['1m', [{ exp_labels: { severity: 'warning', namespace: 'queen', name: 'queen' }, exp_annotations: words.QueenStepFailing() }]]] },
    ]);
  });

  it('QueenClusterNotObserved: a cluster no replica observes for 10 minutes', () => {
    test('QueenClusterNotObserved', [
      {
        series: {
          [`queen_cluster_phase{${c('a')},phase="Ready",pod="op-0"}`]: '1x15',
          [`queen_cluster_phase{${c('b')},phase="Ready",pod="op-0"}`]: '1x15',
          [`queen_cluster_phase{${c('b')},phase="Ready",pod="op-1"}`]: '1x15',
          // a is observed by op-1; b by none.
          [`queen_cluster_observed{${c('a')},pod="op-1"}`]: '1x15',
        },
        expect: [['9m', []], ['10m', [{ exp_labels: { severity: 'warning', namespace: 'queen', name: 'b' }, exp_annotations: words.QueenClusterNotObserved('b') }]]],
      },
    ]);
  });

  it('QueenOperatorUnready: a replica not ready for 5 minutes; QueenOperatorDown: no replica ready', () => {
    test('QueenOperatorUnready', [
      {
        series: { 'queen_operator_ready{pod="op-0"}': '1x10', 'queen_operator_ready{pod="op-1"}': '0x10' },
        expect: [['4m', []], ['5m', [{ exp_labels: { severity: 'warning', pod: 'op-1' }, exp_annotations: { summary: 'Operator replica op-1 is not ready', description: 'Its /readyz fails: its log says which of the API server, Temporal, its watches or its worker does not answer.' } }]]],
      },
    ]);
    test('QueenOperatorDown', [
      { series: { 'queen_operator_ready{pod="op-0"}': '1x10', 'queen_operator_ready{pod="op-1"}': '0x10' }, expect: [['8m', []]] },
      { series: { 'queen_operator_ready{pod="op-0"}': '0x10' }, expect: [['4m', []], ['5m', [{ exp_labels: { severity: 'critical' }, exp_annotations: words.QueenOperatorDown() }]]] },
      // None scraped at all.
      { series: { 'up{job="other"}': '1x10' }, expect: [['5m', [{ exp_labels: { severity: 'critical' }, exp_annotations: words.QueenOperatorDown() }]]] },
    ]);
  });
});
