// `npm run bench -- scale`: what a cluster costs the operator. N QueenClusters (default 200, of 3
// voters, their brokers in the test bed's broker fleets) against one cluster-wide operator installed
// from deploy/install.yaml at its default intervals; they rest, then 50 of them upgrade at once.
// Printed (not asserted, this machine's timings vary):
//   - the operator's resident memory with no cluster and with N at rest (per resting cluster), and
//     its CPU at rest and during the upgrades;
//   - API server requests per second per resting cluster (the operator's own count, by verb);
//   - Temporal history events per resting cluster per day, measured over the rest window and
//     extrapolated (said so), with the timers and activities among them;
//   - activity slots held at rest (the Temporal SDK's gauge) against the clusters observed, and
//     held while N upgrades wait for an approval (waits for a person hold none), with the history
//     events those waits add;
//   - the spec-change-to-first-step latency, p50 and p99, with the upgrades running, and its way
//     from each run's history (run started, workflow task taken, first activity scheduled, taken,
//     done, status seen);
//   - the time of one upgrade among 50 against one alone (the median of three in a row), and where
//     it goes: the pods' restarts (the test bed's part) against the rest, the run's steps against
//     the time between them, each step's time and each gate's hold (the operator's metrics), the
//     API requests by verb and by resource, and how long a request took (and how much of it waited
//     in the operator).
// With QUEEN_BENCH_REPLICAS=1,2,3 the same rest and upgrades are measured again with two and three
// replicas sharing the task queue: the work each replica did, and that no operation ran twice.
//
// Settings (environment): QUEEN_BENCH_CLUSTERS (200), QUEEN_BENCH_VOTERS (3), QUEEN_BENCH_UPGRADES
// (50; 0 measures the rest only), QUEEN_BENCH_REST_SECONDS (600), QUEEN_BENCH_REPLICAS (1),
// QUEEN_BENCH_NAMESPACES (10), QUEEN_BENCH_APPROVALS (the upgrades that wait for an approval at
// once: every cluster). The figures at rest are printed as soon as they are measured.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { GROUP, PLURAL, VERSION, type QueenCluster } from '../../crd/schema.ts';
import { seedSpec } from '../e2e/harness.ts';
import { commitText } from './measure.ts';
import { eventTimeMs } from '../e2e/temporal.ts';
import {
  allReady,
  createClusters,
  eventsBetween,
  firstSteps,
  fleet,
  installOperator,
  listClusters,
  mergePatch,
  operatorReady,
  podRestarts,
  quantile,
  samplePods,
  scrapeAll,
  sleep,
  sum,
  type Fleet,
} from './clusters.ts';

const num = (name: string, dflt: number) => {
  const v = Number(process.env[name] ?? dflt);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name}: "${process.env[name]}" is not a positive number`);
  return v;
};
const CLUSTERS = num('QUEEN_BENCH_CLUSTERS', 200);
const VOTERS = num('QUEEN_BENCH_VOTERS', 3) as 1 | 3 | 5;
/** 0: the rest only (what a resting cluster costs), no upgrade. */
const UPGRADES = process.env.QUEEN_BENCH_UPGRADES?.trim() === '0' ? 0 : Math.min(num('QUEEN_BENCH_UPGRADES', 50), CLUSTERS - 1);
const REST_MS = num('QUEEN_BENCH_REST_SECONDS', 600) * 1000;
const NAMESPACES = Math.min(num('QUEEN_BENCH_NAMESPACES', 10), CLUSTERS);
const REPLICAS = (process.env.QUEEN_BENCH_REPLICAS ?? '1').split(',').map(Number);
const APPROVALS = Math.min(num('QUEEN_BENCH_APPROVALS', CLUSTERS), CLUSTERS);
/** How long the slots are watched while the upgrades wait for their approval. */
const APPROVAL_WATCH_MS = 60_000;
const MIN_READY_SECONDS = 5;
/** How many upgrades alone the ratio is taken against (their median). */
const ALONE_RUNS = 3;
/**
 * The brokers of the benchmark's namespaces run in the test bed's broker fleets (one process per
 * node for all their simulated nodes), with heartbeats every 500 ms: 600 nodes heartbeating every
 * 100 ms would load this machine's two cores with the test bed, not with the operator.
 */
const SIM = { QUEEN_SIM_FLEET: '1', QUEEN_RAFT_HEARTBEAT_MS: '500', QUEEN_RAFT_ELECTION_MS: '3000', QUEEN_RAFT_DISK_CHECK_MS: '1000' };

let f: Fleet | null = null;
afterAll(async () => {
  await f?.close();
});

const mb = (b: number) => b / 1024 / 1024;

/** CPU share of one core used by the operator pods between two samples. */
function cpuShare(a: Awaited<ReturnType<typeof samplePods>>, b: Awaited<ReturnType<typeof samplePods>>, ms: number): number {
  const total = (s: typeof a) => s.reduce((t, p) => t + p.cpuSeconds, 0);
  return (total(b) - total(a)) / (ms / 1000);
}

/** The same, per kind of thread of the operator process (JavaScript, the collector, Temporal's core, ...). */
function cpuShareByThread(a: Awaited<ReturnType<typeof samplePods>>, b: Awaited<ReturnType<typeof samplePods>>, ms: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of b) {
    const was = a.find((x) => x.pod === p.pod)?.threadSeconds ?? {};
    for (const [kind, sec] of Object.entries(p.threadSeconds)) out[kind] = (out[kind] ?? 0) + (sec - (was[kind] ?? 0)) / (ms / 1000);
  }
  return out;
}

/** "JavaScript 6.0%, V8 (collector) 1.1%, ...": the largest first. */
const sharesText = (shares: Record<string, number>) =>
  Object.entries(shares)
    .sort((x, y) => y[1] - x[1])
    .map(([kind, v]) => `${kind} ${(v * 100).toFixed(1)}%`)
    .join(', ');

interface RestFigures {
  replicas: number;
  rssMb: number[];
  cpu: number;
  cpuByThread: Record<string, number>;
  apiPerSecPerCluster: number;
  apiByVerb: Record<string, number>;
  watchesAtRest: number;
  eventsPerClusterDay: number;
  timers: number;
  slotsUsedMax: number;
  rounds: number[];
}

async function rest(fl: Fleet, replicas: number): Promise<RestFigures> {
  const before = await samplePods(fl);
  const m0 = await scrapeAll(fl);
  const from = Date.now();
  let slotsUsedMax = 0;
  let rounds: number[] = [];
  while (Date.now() - from < REST_MS) {
    await sleep(5000);
    const m = await scrapeAll(fl);
    slotsUsedMax = Math.max(slotsUsedMax, [...m.values()].reduce((t, x) => t + sum(x, 'temporal_worker_task_slots_used', { worker_type: 'ActivityWorker' }), 0));
    rounds = [...m.values()].map((x) => sum(x, 'queen_observer_rounds'));
  }
  const to = Date.now();
  const after = await samplePods(fl);
  const m1 = await scrapeAll(fl);
  const apiByVerb = requestsByVerb(m0, m1);
  const requests = Object.values(apiByVerb).reduce((a, b) => a + b, 0) - apiByVerb.watch!;
  let events = 0;
  let timers = 0;
  for (const c of fl.clusters) {
    for (const id of [`queencluster-observer/${c.ns}/${c.name}`, `queencluster/${c.ns}/${c.name}`]) {
      const h = await eventsBetween(fl, id, from, to);
      events += h.events;
      timers += h.timers;
    }
  }
  const seconds = (to - from) / 1000;
  return {
    replicas,
    rssMb: after.map((p) => mb(p.rssBytes)),
    cpu: cpuShare(before, after, to - from),
    cpuByThread: cpuShareByThread(before, after, to - from),
    apiPerSecPerCluster: requests / seconds / fl.clusters.length,
    apiByVerb,
    watchesAtRest: apiByVerb.watch!,
    eventsPerClusterDay: (events / fl.clusters.length) * (86_400 / seconds),
    timers,
    slotsUsedMax,
    rounds,
  };
}

interface UpgradeFigures {
  replicas: number;
  version: string;
  firstStepMs: number[];
  durationsMs: number[];
  cpu: number;
  rssMbMax: number[];
  runsTwice: string[];
  stepsByPod: Record<string, number>;
  /** Where the first step's time went, per upgrade (ms from the previous point; see FIRST_STEP_PARTS). */
  firstStepParts: Record<FirstStepPart, number[]>;
  /** Per upgrade: its pods' restarts (deleting until the successor is Ready), summed (ms). */
  restartsMs: number[];
  /** Per upgrade: its time but those restarts (ms). */
  besideRestartsMs: number[];
  /** Per upgrade: where its run's time went, from its history (ms; see SPLIT_PARTS). */
  historyParts: Record<SplitPart, number[]>;
  /** Seconds per upgrade in each step and held by each gate (the operator's metrics), the largest first. */
  perStep: [string, number][];
  perGate: [string, number][];
  /** The operator's API server requests during the upgrades, by verb, and by verb and resource. */
  apiByVerb: Record<string, number>;
  apiByResource: [string, number][];
  /** The mean time of a request to the API server during the upgrades (ms), by verb: in all, and queued in the operator. */
  apiLatencyMs: Record<string, { all: number; queued: number }>;
  /** Temporal's part during the upgrades (ms, mean), from the SDK's metrics: see temporalLatency. */
  temporalMs: [string, { ms: number; n: number }][];
  seconds: number;
}

/**
 * The way from a spec change to the first step, from the run's history: the watcher starts the run,
 * a worker takes its first workflow task, which schedules beginOperation, which a worker takes and
 * completes (its status write), and the watch sees that status.
 */
const FIRST_STEP_PARTS = ['run started', 'workflow task taken', 'activity scheduled', 'activity taken', 'activity done', 'status seen'] as const;
type FirstStepPart = (typeof FIRST_STEP_PARTS)[number];

type HistoryEvent = { eventTime?: { seconds?: unknown; nanos?: unknown } | null; [k: string]: unknown };
const at = (e: HistoryEvent) => eventTimeMs(e.eventTime);

/**
 * A run's time from its history: its steps running (each activity from started to its end), its
 * steps queued (scheduled to started), and the rest: between one step's end and the next one's
 * schedule, the workflow task that decides it (the worker and Temporal).
 */
const SPLIT_PARTS = ['steps running', 'steps queued', 'between steps'] as const;
type SplitPart = (typeof SPLIT_PARTS)[number];

function historySplit(events: HistoryEvent[]): Record<SplitPart, number> {
  const scheduled = new Map<string, number>();
  const started = new Map<string, number>();
  let running = 0;
  let queued = 0;
  for (const e of events) {
    const id = String(e.eventId);
    if (e.activityTaskScheduledEventAttributes) scheduled.set(id, at(e));
    const s = e.activityTaskStartedEventAttributes as { scheduledEventId?: unknown } | undefined;
    if (s) started.set(String(s.scheduledEventId), at(e));
    for (const attr of ['activityTaskCompletedEventAttributes', 'activityTaskFailedEventAttributes', 'activityTaskTimedOutEventAttributes', 'activityTaskCanceledEventAttributes']) {
      const end = e[attr] as { scheduledEventId?: unknown } | undefined;
      if (!end) continue;
      const sid = String(end.scheduledEventId);
      const from = scheduled.get(sid);
      const begun = started.get(sid) ?? from;
      if (from === undefined || begun === undefined) continue;
      queued += begun - from;
      running += at(e) - begun;
    }
  }
  const total = events.length > 1 ? at(events.at(-1)!) - at(events[0]!) : 0;
  return { 'steps running': running, 'steps queued': queued, 'between steps': total - running - queued };
}

/** The points of a run's history on the way to its first step (epoch ms), or null where missing. */
function firstStepPoints(events: HistoryEvent[]): number[] | null {
  const first = (attr: string) => events.find((e) => e[attr] != null);
  const points = [
    first('workflowExecutionStartedEventAttributes'),
    first('workflowTaskStartedEventAttributes'),
    first('activityTaskScheduledEventAttributes'),
    first('activityTaskStartedEventAttributes'),
    first('activityTaskCompletedEventAttributes'),
  ];
  return points.every((e) => e) ? points.map((e) => at(e!)) : null;
}

/** Upgrades `targets` at once to `version`; returns when each is done. */
async function upgradeAll(fl: Fleet, replicas: number, targets: Fleet['clusters'], version: string): Promise<UpgradeFigures> {
  const watch = firstSteps(fl, 'RollingUpgrade');
  await watch.start();
  const restarts = podRestarts(fl);
  await restarts.start();
  const m0 = await scrapeAll(fl);
  const s0 = await samplePods(fl);
  const patched = new Map<string, number>();
  for (const c of targets) {
    patched.set(`${c.ns}/${c.name}`, Date.now());
    await fl.custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace: c.ns, plural: PLURAL, name: c.name, body: { spec: { version } } },
      mergePatch(),
    );
  }
  const began = Date.now();
  const rssMax = new Map<string, number>();
  const done = new Map<string, QueenCluster>();
  let said = began;
  while (done.size < targets.length) {
    if (Date.now() - began > 3_600_000) throw new Error(`the upgrades did not end within an hour: ${done.size} of ${targets.length} done`);
    await sleep(2000);
    if (Date.now() - said >= 60_000) {
      said = Date.now();
      console.log(`scale: upgrades to ${version}: ${done.size} of ${targets.length} done after ${((said - began) / 1000).toFixed(0)} s`);
    }
    for (const p of await samplePods(fl)) rssMax.set(p.pod, Math.max(rssMax.get(p.pod) ?? 0, p.rssBytes));
    for (const q of await listClusters(fl)) {
      const key = `${q.metadata.namespace}/${q.metadata.name}`;
      const start = patched.get(key);
      if (!start || done.has(key)) continue;
      const last = q.status?.lastOperation;
      if (last?.type === 'RollingUpgrade' && last.result === 'Succeeded' && last.target?.includes(version) && q.status?.version === version) done.set(key, q);
    }
  }
  const s1 = await samplePods(fl);
  const m1 = await scrapeAll(fl);
  await watch.stop();
  await restarts.stop();
  const firstStepMs: number[] = [];
  const durationsMs: number[] = [];
  const runsTwice: string[] = [];
  const restartsMs: number[] = [];
  const besideRestartsMs: number[] = [];
  const historyParts = Object.fromEntries(SPLIT_PARTS.map((p) => [p, [] as number[]])) as Record<SplitPart, number[]>;
  const firstStepParts = Object.fromEntries(FIRST_STEP_PARTS.map((p) => [p, [] as number[]])) as Record<FirstStepPart, number[]>;
  for (const [key, q] of done) {
    const start = patched.get(key)!;
    const first = watch.at(key);
    if (first) firstStepMs.push(first - start);
    durationsMs.push(Date.parse(q.status!.lastOperation!.finishedAt!) - start);
    const restarted = restarts.of(key);
    if (restarted !== null) {
      restartsMs.push(restarted);
      besideRestartsMs.push(durationsMs.at(-1)! - restarted);
    }
    // One run of the upgrade for this target, whichever replica started it.
    const runs: string[] = [];
    for await (const w of fl.temporal.workflow.list({ query: `WorkflowId = 'queencluster/${key}' AND WorkflowType = 'rollingUpgrade'` })) {
      if (w.startTime.getTime() >= start - 1000) runs.push(w.runId);
    }
    if (runs.length === 1) {
      const events = (await fl.temporal.workflow.getHandle(`queencluster/${key}`, runs[0]).fetchHistory()).events as HistoryEvent[];
      const points = first ? firstStepPoints(events) : null;
      if (points) {
        const all = [start, ...points, first!];
        FIRST_STEP_PARTS.forEach((part, i) => firstStepParts[part].push(all[i + 1]! - all[i]!));
      }
      const split = historySplit(events);
      for (const part of SPLIT_PARTS) historyParts[part].push(split[part]);
    }
    const [ns, name] = key.split('/') as [string, string];
    const started = (await fl.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.kind=QueenCluster,involvedObject.name=${name},reason=RollingUpgradeStarted` })).items.filter(
      (e) => Date.parse(String(e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp)) >= start - 1000,
    );
    const count = started.reduce((t, e) => t + (e.count ?? 1), 0);
    if (runs.length !== 1 || count !== 1) runsTwice.push(`${key}: ${runs.length} runs, ${count} RollingUpgradeStarted`);
  }
  const apiByVerb = requestsByVerb(m0, m1);
  const perStep = byLabel(m0, m1, 'queen_step_duration_seconds_sum', 'step', targets.length);
  const perGate = byLabel(m0, m1, 'queen_gate_wait_seconds_total', 'gate', targets.length);
  const stepsByPod: Record<string, number> = {};
  for (const [pod, x] of m1) stepsByPod[pod] = sum(x, 'queen_step_duration_seconds_count') - sum(m0.get(pod) ?? new Map(), 'queen_step_duration_seconds_count');
  return {
    replicas,
    version,
    firstStepMs,
    durationsMs,
    cpu: cpuShare(s0, s1, Date.now() - began),
    rssMbMax: [...rssMax.values()].map(mb),
    runsTwice,
    stepsByPod,
    firstStepParts,
    restartsMs,
    besideRestartsMs,
    apiByVerb,
    apiByResource: requestsByResource(m0, m1),
    apiLatencyMs: requestLatency(m0, m1),
    temporalMs: temporalLatency(m0, m1),
    perStep,
    perGate,
    seconds: (Date.now() - began) / 1000,
    historyParts,
  };
}

interface ApprovalFigures {
  waiting: number;
  /** The most activity slots in use, summed over the replicas, while they all waited. */
  slotsUsedMax: number;
  /** History events their runs added in the window, per waiting upgrade. */
  eventsPerWait: number;
  seconds: number;
}

/**
 * `targets` upgrade to `version` with spec.upgrade.approval Manual: once every one waits before its
 * leader for the approval (parked), the slots in use are watched for a while, then all are approved
 * and end.
 */
async function waitingForApproval(fl: Fleet, targets: Fleet['clusters'], version: string): Promise<ApprovalFigures> {
  for (const c of targets) {
    await fl.custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace: c.ns, plural: PLURAL, name: c.name, body: { spec: { version, upgrade: { approval: 'Manual' } } } },
      mergePatch(),
    );
  }
  const began = Date.now();
  const waits = (qs: QueenCluster[]) => qs.filter((q) => q.status?.operation?.gate === 'approved' && q.status.operation.parked).length;
  for (let n = 0; n < targets.length; n = waits(await listClusters(fl))) {
    if (Date.now() - began > 3_600_000) throw new Error(`the upgrades did not all wait for their approval within an hour: ${n} of ${targets.length}`);
    await sleep(5000);
  }
  console.log(`scale: ${targets.length} upgrades wait for their approval after ${((Date.now() - began) / 1000).toFixed(0)} s`);
  const from = Date.now();
  let slotsUsedMax = 0;
  while (Date.now() - from < APPROVAL_WATCH_MS) {
    const m = await scrapeAll(fl);
    slotsUsedMax = Math.max(slotsUsedMax, [...m.values()].reduce((t, x) => t + sum(x, 'temporal_worker_task_slots_used', { worker_type: 'ActivityWorker' }), 0));
    await sleep(5000);
  }
  const to = Date.now();
  let events = 0;
  for (const c of targets) events += (await eventsBetween(fl, `queencluster/${c.ns}/${c.name}`, from, to)).events;
  for (const c of targets) {
    await fl.custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace: c.ns, plural: PLURAL, name: c.name, body: { metadata: { annotations: { 'queenmq.com/approve': version } } } },
      mergePatch(),
    );
  }
  await allReady(fl, 3_600_000);
  return { waiting: targets.length, slotsUsedMax, eventsPerWait: events / targets.length, seconds: (to - from) / 1000 };
}

type Scrapes = Map<string, Map<string, number>>;

/** A family's growth between two scrapes of every pod, summed by `keyOf` its sample's labels (null: left out). */
function growthBy(m0: Scrapes, m1: Scrapes, family: string, keyOf: (labels: string) => string | null): Map<string, number> {
  const out = new Map<string, number>();
  for (const [pod, x] of m1) {
    for (const [key, v] of x) {
      if (!key.startsWith(`${family}{`)) continue;
      const k = keyOf(key);
      if (k !== null) out.set(k, (out.get(k) ?? 0) + v - (m0.get(pod)?.get(key) ?? 0));
    }
  }
  return out;
}

const labelOf = (labels: string, name: string) => new RegExp(`${name}="([^"]*)"`).exec(labels)?.[1] ?? '';

/** A family's growth between two scrapes of every pod, by one label, divided by `per`; the largest first. */
function byLabel(m0: Scrapes, m1: Scrapes, family: string, label: string, per: number): [string, number][] {
  return [...growthBy(m0, m1, family, (l) => labelOf(l, label)).entries()]
    .map(([k, v]): [string, number] => [k, v / per])
    .filter(([, v]) => v > 0.05)
    .sort((a, b) => b[1] - a[1]);
}

const VERBS = ['get', 'list', 'watch', 'patch', 'post', 'put', 'delete'];

/** The mean time of the operator's requests to the API server between two scrapes (ms), by verb. */
function requestLatency(m0: Scrapes, m1: Scrapes): Record<string, { all: number; queued: number }> {
  const grown = (family: string, verb: string) =>
    [...m1.entries()].reduce((t, [pod, x]) => t + sum(x, family, { verb }) - sum(m0.get(pod) ?? new Map(), family, { verb }), 0);
  const out: Record<string, { all: number; queued: number }> = {};
  for (const v of VERBS) {
    const n = grown('queen_apiserver_request_duration_seconds_count', v);
    if (n === 0) continue;
    out[v] = {
      all: (grown('queen_apiserver_request_duration_seconds_sum', v) / n) * 1000,
      queued: (grown('queen_apiserver_request_queued_seconds_sum', v) / n) * 1000,
    };
  }
  return out;
}

/**
 * Where a step's trip through Temporal goes, from the SDK's own metrics between two scrapes (ms,
 * mean, and how many): "a workflow task of <type> in the worker" is the worker's time on one (from
 * taking it to its completion sent), each other entry a call to the Temporal server as the
 * operator waited for it (StartWorkflowExecution, RespondWorkflowTaskCompleted, ...); the most
 * time in all first.
 */
function temporalLatency(m0: Scrapes, m1: Scrapes): [string, { ms: number; n: number }][] {
  const out: [string, { ms: number; n: number }][] = [];
  const mean = (family: string, keyOf: (labels: string) => string | null) => {
    const sums = growthBy(m0, m1, `${family}_sum`, keyOf);
    for (const [k, n] of growthBy(m0, m1, `${family}_count`, keyOf)) if (n > 0) out.push([k, { ms: ((sums.get(k) ?? 0) / n) * 1000, n }]);
  };
  mean('temporal_workflow_task_execution_latency', (l) => `a workflow task of ${labelOf(l, 'workflow_type')} in the worker`);
  mean('temporal_request_latency', (l) => labelOf(l, 'operation') || null);
  return out.sort((a, b) => b[1].ms * b[1].n - a[1].ms * a[1].n);
}

/** The operator pods' API server requests between two scrapes but watches, by verb and resource ("get pods"), the most first. */
function requestsByResource(m0: Scrapes, m1: Scrapes): [string, number][] {
  const grown = growthBy(m0, m1, 'queen_apiserver_requests_total', (l) => (labelOf(l, 'verb') === 'watch' ? null : `${labelOf(l, 'verb')} ${labelOf(l, 'resource')}`));
  return [...grown.entries()].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
}

/** The operator pods' API server requests between two scrapes, by verb. */
function requestsByVerb(m0: Scrapes, m1: Scrapes): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of VERBS) {
    out[v] = [...m1.entries()].reduce((t, [pod, x]) => t + sum(x, 'queen_apiserver_requests_total', { verb: v }) - sum(m0.get(pod) ?? new Map(), 'queen_apiserver_requests_total', { verb: v }), 0);
  }
  return out;
}

/** What the clusters cost at rest, in lines: the operator's memory, CPU, API requests, history, slots. */
function restLines(empty: Awaited<ReturnType<typeof samplePods>>, r1: RestFigures): string[] {
  const emptyMb = mb(empty.reduce((t, p) => t + p.rssBytes, 0) / Math.max(1, empty.length));
  const perCluster = (r1.rssMb[0]! - emptyMb) / CLUSTERS;
  return [
    `scale benchmark on ${commitText()}: ${CLUSTERS} clusters of ${VOTERS} voters, ${UPGRADES} upgrades at once, default intervals (observe 10s, probe 1m), rest window ${REST_MS / 1000} s`,
    `memory: ${emptyMb.toFixed(0)} MB with no cluster, ${r1.rssMb[0]!.toFixed(0)} MB at rest: ${perCluster.toFixed(2)} MB per resting cluster (goal: under 1 MB, under 500 MB in all)`,
    `CPU at rest: ${(r1.cpu * 100).toFixed(1)}% of a core, ${((r1.cpu * 100) / CLUSTERS).toFixed(3)}% per resting cluster (goal: under 10% in all); by thread: ${sharesText(r1.cpuByThread)}`,
    `API server requests at rest: ${r1.apiPerSecPerCluster.toFixed(4)} per second per cluster (goal: under 0.2); by verb ${JSON.stringify(r1.apiByVerb)}`,
    `history at rest: ${r1.eventsPerClusterDay.toFixed(0)} events per cluster per day, extrapolated from the ${REST_MS / 1000} s window (goal: under 2000); timers started: ${r1.timers}`,
    `activity slots held at rest: at most ${r1.slotsUsedMax}, with ${r1.rounds.reduce((a, b) => a + b, 0)} clusters observed`,
  ];
}

it(`scale: ${CLUSTERS} clusters of ${VOTERS} voters on one operator, then ${UPGRADES} upgrades at once`, async () => {
  f = await fleet('scale', NAMESPACES, SIM);
  await installOperator(f, REPLICAS[0]!);
  // The operator with no cluster, settled.
  await sleep(30_000);
  const empty = await samplePods(f);
  console.log(`scale: operator with no cluster: ${empty.map((p) => `${p.pod} ${mb(p.rssBytes).toFixed(0)} MB`).join(', ')}`);

  const created = Date.now();
  await createClusters(f, CLUSTERS, seedSpec({ replicas: VOTERS, minReadySeconds: MIN_READY_SECONDS }));
  await allReady(f, 3_600_000);
  console.log(`scale: ${CLUSTERS} clusters Ready after ${((Date.now() - created) / 1000).toFixed(0)} s`);
  // Formation over, every observer in its rounds.
  await sleep(60_000);

  const rests: RestFigures[] = [];
  const upgrades: UpgradeFigures[] = [];
  let alone: {
    /** Each upgrade alone, in their order. */
    runsMs: number[];
    /** The median of them, whose run gives the other figures. */
    ms: number;
    firstStepMs: number;
    restartsMs: number;
    historyParts: Record<SplitPart, number>;
    perStep: [string, number][];
    perGate: [string, number][];
    apiLatencyMs: UpgradeFigures['apiLatencyMs'];
  } | null = null;
  const versions = ['2.6.1', '2.6.2', '2.6.3', '2.6.4'];
  for (const [i, replicas] of REPLICAS.entries()) {
    if (i > 0) {
      await operatorReady(f, replicas);
      await sleep(60_000);
    }
    console.log(`scale: ${replicas} replica${replicas > 1 ? 's' : ''}: resting ${REST_MS / 1000} s`);
    rests.push(await rest(f, replicas));
    if (i === 0) console.log(restLines(empty, rests[0]!).join('\n'));
    if (UPGRADES === 0) continue;
    if (i === 0) {
      // Upgrades alone, for the comparison: one cluster upgraded ALONE_RUNS times in a row, and the
      // run of the median time stands for them (one run alone moves by seconds: a pod is seen
      // Ready at its readiness probe's next period).
      const runs: UpgradeFigures[] = [];
      for (const version of versions.slice(0, ALONE_RUNS)) {
        console.log(`scale: one upgrade alone, to ${version}`);
        runs.push(await upgradeAll(f, replicas, [f.clusters[0]!], version));
      }
      const byTime = [...runs].sort((a, b) => a.durationsMs[0]! - b.durationsMs[0]!);
      const one = byTime[Math.floor((byTime.length - 1) / 2)]!;
      alone = { runsMs: runs.map((r) => r.durationsMs[0]!), ms: one.durationsMs[0]!, firstStepMs: one.firstStepMs[0] ?? NaN, restartsMs: one.restartsMs[0] ?? NaN, historyParts: Object.fromEntries(SPLIT_PARTS.map((p) => [p, one.historyParts[p][0] ?? NaN])) as Record<SplitPart, number>, perStep: one.perStep, perGate: one.perGate, apiLatencyMs: one.apiLatencyMs };
    }
    console.log(`scale: ${UPGRADES} upgrades at once`);
    upgrades.push(await upgradeAll(f, replicas, f.clusters.slice(1, 1 + UPGRADES), versions[i]!));
    await allReady(f, 600_000);
  }
  console.log(`scale: ${APPROVALS} upgrades waiting for an approval`);
  const approvals = await waitingForApproval(f, f.clusters.slice(0, APPROVALS), '2.6.5');

  const lines = [
    ...restLines(empty, rests[0]!),
    `activity slots held by ${approvals.waiting} upgrades waiting for an approval: at most ${approvals.slotsUsedMax} (goal: 0); their history grew by ${approvals.eventsPerWait.toFixed(2)} events per wait in ${approvals.seconds.toFixed(0)} s`,
  ];
  for (const u of upgrades) {
    const median = quantile(u.durationsMs, 0.5);
    lines.push(
      `${u.replicas} replica${u.replicas > 1 ? 's' : ''}, ${u.durationsMs.length} upgrades to ${u.version}: first step p50 ${(quantile(u.firstStepMs, 0.5) / 1000).toFixed(2)} s, p99 ${(quantile(u.firstStepMs, 0.99) / 1000).toFixed(2)} s (goal: p99 under 2 s); ` +
        `an upgrade took ${(median / 1000).toFixed(1)} s (median), ${(Math.max(...u.durationsMs) / 1000).toFixed(1)} s (longest), alone ${((alone?.ms ?? NaN) / 1000).toFixed(1)} s (the median of ${(alone?.runsMs ?? []).map((ms) => (ms / 1000).toFixed(1)).join(', ')}): ratio ${(median / (alone?.ms ?? NaN)).toFixed(2)} (goal: within 1.2); ` +
        `CPU ${(u.cpu * 100).toFixed(0)}% of a core, memory at most ${u.rssMbMax.map((m) => m.toFixed(0)).join(' + ')} MB; steps per replica ${JSON.stringify(u.stepsByPod)}; operations run twice: ${u.runsTwice.length}`,
      `  of an upgrade, its pods' restarts (deleting until the successor is Ready, the test bed's part) took ${(quantile(u.restartsMs, 0.5) / 1000).toFixed(1)} s (median), alone ${((alone?.restartsMs ?? NaN) / 1000).toFixed(1)} s; ` +
        `the rest ${(quantile(u.besideRestartsMs, 0.5) / 1000).toFixed(1)} s (median), alone ${(((alone?.ms ?? NaN) - (alone?.restartsMs ?? NaN)) / 1000).toFixed(1)} s`,
      `  of an upgrade's run, from its history (s, median, alone): ${SPLIT_PARTS.map((p) => `${p} ${(quantile(u.historyParts[p], 0.5) / 1000).toFixed(1)}, ${((alone?.historyParts[p] ?? NaN) / 1000).toFixed(1)}`).join('; ')}`,
      `  per upgrade, in each step (s): ${u.perStep.map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}; alone: ${(alone?.perStep ?? []).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}`,
      `  per upgrade, held by each gate (s): ${u.perGate.map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}; alone: ${(alone?.perGate ?? []).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}`,
      `  API server requests during the upgrades: ${(Object.entries(u.apiByVerb).reduce((t, [v, n]) => t + (v === 'watch' ? 0 : n), 0) / u.seconds / u.durationsMs.length).toFixed(1)} per second per upgrading cluster; by verb ${JSON.stringify(u.apiByVerb)} in ${u.seconds.toFixed(0)} s; per upgrade: ${u.apiByResource.map(([k, n]) => `${k} ${(n / u.durationsMs.length).toFixed(1)}`).join(', ')}`,
      `  a request to the API server took (ms, mean, queued in the operator in brackets): ${Object.entries(u.apiLatencyMs).map(([v, l]) => `${v} ${l.all.toFixed(0)} (${l.queued.toFixed(0)})`).join(', ')}; alone: ${Object.entries(alone?.apiLatencyMs ?? {}).map(([v, l]) => `${v} ${l.all.toFixed(0)} (${l.queued.toFixed(0)})`).join(', ')}`,
      `  Temporal during the upgrades (ms, mean, how many in brackets): ${u.temporalMs.slice(0, 6).map(([k, t]) => `${k} ${t.ms.toFixed(0)} (${t.n})`).join(', ')}`,
      `  the first step's way, p50 / p99 of each part (s): ${FIRST_STEP_PARTS.map((p) => `${p} ${(quantile(u.firstStepParts[p], 0.5) / 1000).toFixed(2)} / ${(quantile(u.firstStepParts[p], 0.99) / 1000).toFixed(2)}`).join(', ')}`,
    );
  }
  for (const r of rests.slice(1)) {
    lines.push(
      `${r.replicas} replicas at rest: memory ${r.rssMb.map((m) => m.toFixed(0)).join(' + ')} MB, CPU ${(r.cpu * 100).toFixed(1)}%, clusters observed per replica ${JSON.stringify(r.rounds)}, ${r.apiPerSecPerCluster.toFixed(4)} API requests per second per cluster, ${r.eventsPerClusterDay.toFixed(0)} history events per cluster per day`,
    );
  }
  console.log(lines.join('\n'));
  mkdirSync('.cache', { recursive: true });
  writeFileSync(join('.cache', `bench-scale-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), JSON.stringify({ CLUSTERS, VOTERS, UPGRADES, REST_MS, empty, rests, upgrades, alone, approvals }, null, 2));
  // What does not depend on the machine: nothing ran twice.
  for (const u of upgrades) expect(u.runsTwice).toEqual([]);
}, 6 * 3600_000);
