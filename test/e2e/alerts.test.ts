// e2e `alerts`: the alerting rules against a real Prometheus (Debian's prometheus package, on
// loopback only) that scrapes the installed operator's pods where their prometheus.io annotations
// say (their pod IP, port 9090, /metrics). A cluster loses its quorum (two of three voters killed and held by the test
// bed): QueenClusterNotCommitting fires, for this cluster; the voters come back: it resolves. The
// rules are the chart's, rendered with the one value a test cannot wait for shortened: COMMITS
// false for 20s instead of 2m.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { renderChart } from '../../crd/generate.ts';
import { control } from '../testbed/client.ts';
import { freePorts } from '../testbed/ports.ts';
import { formed, scenario, seedSpec, sleep, testbed, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
let prometheus: ChildProcess | null = null;
afterAll(async () => {
  prometheus?.kill('SIGTERM');
  await s?.close();
});

interface Alert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
}

it('alerts: a real Prometheus sees QueenClusterNotCommitting fire when the quorum is lost, and resolve when it is back', async () => {
  s = await scenario('alerts');
  await s.install({ probeInterval: '10s' });
  await formed(s, seedSpec());

  const dir = join(testbed().dir, 'prometheus', s.ns);
  mkdirSync(dir, { recursive: true });
  const rule = parse(renderChart({ 'metrics.prometheusRule.enabled': 'true', 'metrics.prometheusRule.commitsFalseFor': '20s' }, 'templates/prometheusrule.yaml')) as { spec: { groups: unknown[] } };
  writeFileSync(join(dir, 'alerts.yaml'), stringify({ groups: rule.spec.groups }));
  // The operator's pods as a Prometheus finds them by their prometheus.io annotations: Debian's
  // build has no Kubernetes discovery, so the test reads them from the API server into a file of
  // targets (file_sd), which is what that discovery would give.
  const pods = await s.installed!.pods(s.core);
  const targets = pods.map((p) => {
    const a = p.metadata!.annotations ?? {};
    expect(a['prometheus.io/scrape']).toBe('true');
    return { targets: [`${p.status!.podIP}:${a['prometheus.io/port']}`], labels: { pod: p.metadata!.name!, __metrics_path__: a['prometheus.io/path']! } };
  });
  writeFileSync(join(dir, 'targets.yaml'), stringify(targets));
  const config = {
    global: { scrape_interval: '2s', evaluation_interval: '2s' },
    rule_files: [join(dir, 'alerts.yaml')],
    scrape_configs: [{ job_name: 'queen-operator', file_sd_configs: [{ files: [join(dir, 'targets.yaml')] }] }],
  };
  writeFileSync(join(dir, 'prometheus.yml'), stringify(config));
  const [port] = await freePorts(1);
  prometheus = spawn('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  prometheus.stderr!.on('data', (d) => (log = (log + d).slice(-5000)));
  prometheus.on('error', (e) => (log += `\nprometheus could not run (${e.message}): it comes with Debian's prometheus package, which .ci/run installs`));
  const api = async <T>(path: string): Promise<T> => ((await (await fetch(`http://127.0.0.1:${port}/api/v1/${path}`)).json()) as { data: T }).data;
  const commits = async () => (await api<{ result: Array<{ value: [number, string] }> }>(`query?query=${encodeURIComponent(`max(queen_cluster_commits{namespace="${s!.ns}",name="queen"})`)}`)).result[0]?.value[1];
  let targetsSeen = '';
  await waitFor(
    'Prometheus scraping the operator: COMMITS 1',
    async () => {
      targetsSeen = JSON.stringify((await api<{ activeTargets: Array<{ scrapeUrl: string; health: string; lastError: string }> }>('targets')).activeTargets.map((t) => [t.scrapeUrl, t.health, t.lastError]));
      return (await commits()) === '1';
    },
    90_000,
    () => `targets ${targetsSeen}; ${log.slice(-1000)}`,
  );
  const ours = async () => (await api<{ alerts: Alert[] }>('alerts')).alerts.filter((a) => a.labels.alertname === 'QueenClusterNotCommitting' && a.labels.namespace === s!.ns);
  expect(await ours()).toEqual([]);

  // Two of three voters killed and kept down: no write commits.
  await control.kill(s.ns, 'queen-1', { hold: true });
  await control.kill(s.ns, 'queen-2', { hold: true });
  await waitForCluster(s, 'COMMITS false', (q) => q.status?.commits === false, 60_000);
  const firing = await waitFor('QueenClusterNotCommitting firing', async () => (await ours()).find((a) => a.state === 'firing'), 120_000, () => log);
  expect(firing.labels).toEqual({ alertname: 'QueenClusterNotCommitting', namespace: s.ns, name: 'queen', severity: 'critical' });

  // Back: it resolves.
  await control.release(s.ns, 'queen-1');
  await control.release(s.ns, 'queen-2');
  await waitForCluster(s, 'COMMITS true again', (q) => q.status?.commits === true, 120_000);
  await waitFor('QueenClusterNotCommitting resolved', async () => (await ours()).length === 0, 60_000);
  await sleep(4000);
  expect(await ours()).toEqual([]);
});
