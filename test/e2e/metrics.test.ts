// e2e `metrics`: the installed operator's /metrics (its pod IP, port 9090, as the Deployment's
// Prometheus annotations say), scraped before, during and after an upgrade: the operation and step
// counters, the gate waits, the per-cluster gauges, the API server requests (by resource, and their
// time) and the Temporal SDK's worker metrics are there, and the counters move.
import { afterAll, expect, it } from 'vitest';
import { FOLD_WINDOW_MS, PERIOD_OVERLAP_MS } from '../../activities/kube.ts';
import { clusterEvents, formed, getCluster, metricSamples as samples, metricSum as sum, patchSpec, scenario, seedSpec, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario;
afterAll(() => s?.close());

it('metrics: the counters move during an upgrade', async () => {
  s = await scenario('metrics');
  const op = await s.install();
  await formed(s, seedSpec());
  const [pod] = await op.pods(s.core);
  const annotations = pod!.metadata?.annotations ?? {};
  expect(annotations['prometheus.io/scrape']).toBe('true');
  const url = `http://${pod!.status!.podIP}:${annotations['prometheus.io/port']}${annotations['prometheus.io/path']}`;
  const scrape = async () => {
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return samples(await res.text());
  };
  // At rest: the formation's last step and an observer's short round may still hold an activity
  // slot for a moment after the phase turned Ready; a slot held at rest never lets go.
  const slotsUsed = (m: Map<string, number>) => sum(m, 'temporal_worker_task_slots_used', { worker_type: 'ActivityWorker' });
  await waitFor('no activity slot in use once the cluster rests', async () => slotsUsed(await scrape()) === 0, 15_000);
  const beforeAt = Date.now();
  const before = await scrape();
  const c = { namespace: s.ns, name: 'queen' };
  expect(sum(before, 'queen_operations_ended_total', { type: 'FormCluster', result: 'Succeeded' })).toBe(1);
  expect(sum(before, 'queen_cluster_phase', { ...c, phase: 'Ready' })).toBe(1);
  expect(sum(before, 'queen_cluster_commits', c)).toBe(1);
  expect(sum(before, 'queen_cluster_voters', c)).toBe(3);
  expect(sum(before, 'queen_apiserver_requests_total', { verb: 'get', code: '200' })).toBeGreaterThan(0);
  expect(sum(before, 'queen_apiserver_requests_total', { verb: 'watch' })).toBeGreaterThan(0);
  // The Temporal SDK's own worker metrics, on the same endpoint.
  expect([...before.keys()].some((k) => k.startsWith('temporal_worker_task_slots_available'))).toBe(true);
  expect(sum(before, 'queen_operations_started_total', { type: 'RollingUpgrade' })).toBe(0);
  // At rest: the cluster is observed by this replica and holds no activity slot; the task queue's
  // backlog is read from Temporal.
  expect(sum(before, 'queen_observer_rounds')).toBe(1);
  expect(slotsUsed(before)).toBe(0);
  expect([...before.keys()].filter((k) => k.startsWith('queen_task_queue_backlog{')).sort()).toEqual(['queen_task_queue_backlog{type="activity"}', 'queen_task_queue_backlog{type="workflow"}']);

  const upgradeAt = Date.now();
  await patchSpec(s, { version: '2.6.1' });
  const during = await waitFor('a restart counted', async () => {
    const m = await scrape();
    return sum(m, 'queen_step_duration_seconds_count', { step: 'restartPod' }) >= 1 ? m : undefined;
  }, 180_000);
  expect(sum(during, 'queen_operations_started_total', { type: 'RollingUpgrade' })).toBe(1);
  expect(sum(during, 'queen_cluster_phase', { ...c, phase: 'Upgrading' })).toBe(1);
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'RollingUpgrade', 300_000);
  const after = await waitFor('the upgrade counted as ended', async () => {
    const m = await scrape();
    return sum(m, 'queen_operations_ended_total', { type: 'RollingUpgrade', result: 'Succeeded' }) === 1 ? m : undefined;
  }, 30_000);
  expect(sum(after, 'queen_step_duration_seconds_count', { step: 'restartPod' })).toBeGreaterThanOrEqual(3);
  expect(sum(after, 'queen_operation_duration_seconds_count', { type: 'RollingUpgrade', result: 'Succeeded' })).toBe(1);
  // The upgrade waited at the stop gate for minReadySeconds, and the metric says so.
  expect(sum(after, 'queen_gate_wait_seconds_total', { ...c, gate: 'pod-ready-for-min-ready-seconds' })).toBeGreaterThan(1);
  // Each restart is an eviction (a POST the API server answers 201), among the Events' POSTs.
  const posts = (m: typeof after) => sum(m, 'queen_apiserver_requests_total', { verb: 'post', code: '201' });
  expect(posts(after) - posts(before)).toBeGreaterThanOrEqual(3);
  // By resource: one eviction per pod, each granted once.
  const evictions = (m: typeof after) => sum(m, 'queen_apiserver_requests_total', { verb: 'post', resource: 'pods/eviction', code: '201' });
  expect(evictions(after) - evictions(before)).toBe(3);
  // The upgrade's Events (started, the template, a drain and a restart per pod, the end) are
  // written without a list of the namespace's Events: each is found by its name. The one read is
  // in a fold period's first minute, of the last period's Event by its name (and of this one's
  // after a 409): none at all when the upgrade's Events fall outside such a minute.
  const events = (m: typeof after, verb: string) => sum(m, 'queen_apiserver_requests_total', { verb, resource: 'events' });
  expect(events(after, 'post') - events(before, 'post')).toBeGreaterThanOrEqual(5);
  const inFirstMinute = (await clusterEvents(s)).filter((e) => {
    const t = new Date(e.lastTimestamp ?? 0).getTime();
    return t >= beforeAt - 1000 && t % FOLD_WINDOW_MS < PERIOD_OVERLAP_MS;
  }).length;
  expect(events(after, 'get') - events(before, 'get')).toBeLessThanOrEqual(2 * inFirstMinute);
  // What the upgrade read, by resource (printed: it depends on how fast this machine runs the pods).
  const gets = [...new Set([...after.keys()].filter((k) => k.startsWith('queen_apiserver_requests_total{') && k.includes('verb="get"')).map((k) => /resource="([^"]*)"/.exec(k)?.[1] ?? ''))]
    .map((resource) => [resource, sum(after, 'queen_apiserver_requests_total', { verb: 'get', resource }) - sum(before, 'queen_apiserver_requests_total', { verb: 'get', resource })] as const)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1]);
  console.log(`metrics: the upgrade's GETs by resource: ${gets.map(([r, n]) => `${r} ${n}`).join(', ')}`);
  // And how long the API server took to answer.
  expect(sum(after, 'queen_apiserver_request_duration_seconds_count', { verb: 'get' })).toBeGreaterThan(sum(before, 'queen_apiserver_request_duration_seconds_count', { verb: 'get' }));
  const term = (await getCluster(s)).status!.term!;
  expect(sum(after, 'queen_cluster_leader_term', c)).toBe(term);
  expect(sum(after, 'queen_cluster_leader_changes_total', c)).toBeGreaterThanOrEqual(1);
  expect(sum(after, 'temporal_activity_execution_latency_count')).toBeGreaterThan(sum(before, 'temporal_activity_execution_latency_count'));
  // The watcher asks Temporal about the run at most once in its describe gap (5 s) while only the
  // steps' status writes change, and at the few changes a decision rests on (the run recorded, its
  // end): not at each of the upgrade's status writes, as it did (27 describes an upgrade among 50).
  const describes = (m: typeof after) => sum(m, 'temporal_request_latency_count', { operation: 'DescribeWorkflowExecution' });
  const seconds = (Date.now() - upgradeAt) / 1000;
  const statusWrites = sum(after, 'queen_apiserver_requests_total', { verb: 'patch', resource: 'queenclusters/status' }) - sum(before, 'queen_apiserver_requests_total', { verb: 'patch', resource: 'queenclusters/status' });
  console.log(`metrics: ${describes(after) - describes(before)} describes of a run in the upgrade's ${seconds.toFixed(0)} s, with ${statusWrites} status writes`);
  expect(describes(after) - describes(before)).toBeLessThanOrEqual(Math.ceil(seconds / 5) + 6);
});
