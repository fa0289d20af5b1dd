// e2e `scale-clusters`: the small version of `npm run bench -- scale`. Twenty one-voter clusters
// (their brokers in the test bed's broker fleets) on one operator replica at its default intervals
// rest for a while. What does not depend on this machine's noise is asserted: a resting cluster
// holds no activity slot (the Temporal SDK's gauge stays at zero while the operator observes all
// twenty), no Temporal timer, one observer activity per ten-minute round, and the operator's watches
// do not grow with the clusters (the same few watches for one cluster and for twenty; the bench
// takes 200). The timings (memory and CPU of the operator's pod, API requests per resting cluster) are
// printed.
import { afterAll, expect, it } from 'vitest';
import { processUsage } from '../bench/clusters.ts';
import { control } from '../testbed/client.ts';
import { createCluster, formed, scenario, seedSpec, sleep, waitForCluster, type Scenario } from './harness.ts';
import { historyEvents, workflowRuns } from './temporal.ts';

const CLUSTERS = 20;
const REST_MS = 40_000;
/** The operator's defaults: a look every 10 s, the write probe every minute; a round lasts 10 min. */
const DEFAULT_INTERVALS = { observeInterval: '10s', probeInterval: '1m', pollInterval: '2s' };

let s: Scenario;
afterAll(() => s?.close());

/** The operator pod's metrics, as `name{labels}` → value. */
async function metrics(): Promise<Map<string, number>> {
  const pod = (await s.installed!.pods(s.core)).find((p) => !p.metadata?.deletionTimestamp)!;
  const text = await (await fetch(`http://${pod.status!.podIP}:9090/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\S+?)(\{.*\})?\s+(\S+)$/.exec(line);
    if (m && !line.startsWith('#')) out.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]));
  }
  return out;
}

const total = (m: Map<string, number>, family: string, label = '') =>
  [...m.entries()].filter(([k]) => (k === family || k.startsWith(`${family}{`)) && k.includes(label)).reduce((t, [, v]) => t + v, 0);

/** Resident memory (MB) and CPU seconds of the operator pod's process. */
async function usage(): Promise<{ rssMb: number; cpuSeconds: number }> {
  const pod = (await s.installed!.pods(s.core)).find((p) => !p.metadata?.deletionTimestamp)!;
  const info = await control.pod(s.ns, pod.metadata!.name!);
  const u = processUsage(info.pid!);
  return { rssMb: u.rssBytes / 1024 / 1024, cpuSeconds: u.cpuSeconds };
}

/** Watches the operator opened, and observer activities and timers, over a rest window. */
async function restWindow(clusters: string[]) {
  const m0 = await metrics();
  const u0 = await usage();
  const from = Date.now();
  let slotsMax = 0;
  let rounds = 0;
  // The SDK's gauge is there to be read (a missing family would read as no slot held).
  expect([...m0.keys()].some((k) => k.startsWith('temporal_worker_task_slots_used{') && k.includes('worker_type="ActivityWorker"'))).toBe(true);
  while (Date.now() - from < REST_MS) {
    await sleep(5000);
    const m = await metrics();
    slotsMax = Math.max(slotsMax, total(m, 'temporal_worker_task_slots_used', 'worker_type="ActivityWorker"'));
    rounds = total(m, 'queen_observer_rounds');
  }
  const to = Date.now();
  const m1 = await metrics();
  const u1 = await usage();
  let activities = 0;
  let timers = 0;
  for (const name of clusters) {
    for (const run of await workflowRuns(s, `queencluster-observer/${s.ns}/${name}`)) {
      for (const e of await historyEvents(s, run)) {
        const at = Number(e.eventTime?.seconds ?? 0) * 1000;
        if (at < from || at > to) continue;
        if (e.activityTaskScheduledEventAttributes) activities++;
        if (e.timerStartedEventAttributes) timers++;
      }
    }
  }
  const delta = (family: string, label = '') => total(m1, family, label) - total(m0, family, label);
  const seconds = (to - from) / 1000;
  return {
    heapMb: total(m1, 'queen_process_nodejs_heap_size_used_bytes') / 1024 / 1024,
    externalMb: total(m1, 'queen_process_nodejs_external_memory_bytes') / 1024 / 1024,
    slotsMax,
    rounds,
    watches: delta('queen_apiserver_requests_total', 'verb="watch"'),
    requestsPerClusterPerSecond: (delta('queen_apiserver_requests_total') - delta('queen_apiserver_requests_total', 'verb="watch"')) / seconds / clusters.length,
    activities,
    timers,
    rssMb: u1.rssMb,
    cpu: (u1.cpuSeconds - u0.cpuSeconds) / seconds,
  };
}

it(`scale-clusters: ${CLUSTERS} resting clusters hold no activity slot, no timer, no watch of their own`, async () => {
  s = await scenario('scale', { sim: { QUEEN_SIM_FLEET: '1' } });
  await s.install(DEFAULT_INTERVALS);
  const spec = seedSpec({ replicas: 1, minReadySeconds: 1, resources: { requests: { cpu: '10m', memory: '16Mi' } } });
  await formed(s, spec, 'q00');
  await sleep(20_000);
  const one = await restWindow(['q00']);

  const names = Array.from({ length: CLUSTERS }, (_, i) => `q${String(i).padStart(2, '0')}`);
  for (const name of names.slice(1)) await createCluster(s, spec, name);
  for (const name of names) await waitForCluster(s, `${name} Ready`, (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 300_000, name);
  await sleep(20_000);
  const many = await restWindow(names);

  console.log(
    `scale-clusters: at rest, 1 cluster: ${one.rssMb.toFixed(0)} MB (JavaScript heap ${one.heapMb.toFixed(0)} MB, external ${one.externalMb.toFixed(0)} MB), ${(one.cpu * 100).toFixed(1)}% of a core, ${one.requestsPerClusterPerSecond.toFixed(3)} API requests/s per cluster, ${one.watches} watches opened in ${REST_MS / 1000} s; ` +
      `${CLUSTERS} clusters: ${many.rssMb.toFixed(0)} MB (${((many.rssMb - one.rssMb) / (CLUSTERS - 1)).toFixed(2)} MB per cluster; JavaScript heap ${many.heapMb.toFixed(0)} MB, external ${many.externalMb.toFixed(0)} MB), ${(many.cpu * 100).toFixed(1)}% of a core, ` +
      `${many.requestsPerClusterPerSecond.toFixed(3)} API requests/s per cluster, ${many.watches} watches opened, activity slots held at most ${many.slotsMax}, ${many.activities} observer activities and ${many.timers} timers in the window`,
  );
  // Every cluster is observed, and none holds a slot for it.
  expect(many.rounds).toBe(CLUSTERS);
  expect(many.slotsMax).toBe(0);
  // No Temporal timer; an observer's round is one activity of ten minutes: at most two began per
  // cluster in the window (one ending, one beginning).
  expect(many.timers).toBe(0);
  expect(many.activities).toBeLessThanOrEqual(2 * CLUSTERS);
  // The watches are the process's, not the clusters': twenty clusters open no more than one does.
  expect(many.watches).toBeLessThanOrEqual(one.watches + 5);
});
