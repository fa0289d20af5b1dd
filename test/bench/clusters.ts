// What the scale benchmark and its small version in npm test share: many QueenClusters against one
// cluster-wide operator (deploy/install.yaml, its replicas set), the operator's pods measured from
// the outside (resident memory and CPU from /proc, its /metrics scraped), and the Temporal
// history of the resting clusters' observers counted over a window.
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, makeInformer, PatchStrategy, setHeaderOptions, type KubeConfig, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { Client, Connection } from '@temporalio/client';
import { isMap, isSeq, parseAllDocuments } from 'yaml';
import { GROUP, PLURAL, VERSION, type QueenCluster, type QueenClusterSpec } from '../../crd/schema.ts';
import { control } from '../testbed/client.ts';
import { adminKubeConfig, createSecret, kubectl, metricSamples, metricSum, sleep, testbed, waitFor } from '../e2e/harness.ts';
import { eventTimeMs } from '../e2e/temporal.ts';

const INSTALL = fileURLToPath(new URL('../../deploy/install.yaml', import.meta.url));
const OPERATOR_NS = 'queen-system';
const OPERATOR_LABEL = 'app.kubernetes.io/name=queen-operator';

export interface Fleet {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  custom: CustomObjectsApi;
  temporal: Client;
  namespaces: string[];
  /** Every cluster, as namespace/name. */
  clusters: { ns: string; name: string }[];
  close(): Promise<void>;
}

/**
 * `count` namespaces with the Secret of seed 000 and the simulator settings `sim` (the benchmark
 * asks for the broker fleet mode there), and a Temporal client.
 */
export async function fleet(prefix: string, count: number, sim: Record<string, string>): Promise<Fleet> {
  const kc = adminKubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const namespaces = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  for (const ns of namespaces) {
    await control.setSimEnv(ns, sim);
    await core.createNamespace({ body: { metadata: { name: ns } } });
    await createSecret(core, ns);
  }
  const connection = await Connection.connect({ address: testbed().temporal.address });
  const temporal = new Client({ connection, namespace: testbed().temporal.namespace });
  return {
    kc,
    core,
    apps: kc.makeApiClient(AppsV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    temporal,
    namespaces,
    clusters: [],
    async close() {
      await kubectl(['-n', OPERATOR_NS, 'delete', 'deployment', 'queen-operator', '--ignore-not-found', '--wait=true']);
      for (const ns of namespaces) await core.deleteNamespace({ name: ns }).catch(() => undefined);
      for await (const w of temporal.workflow.list({ query: `ExecutionStatus = 'Running'` })) {
        if (namespaces.some((ns) => w.workflowId.includes(`/${ns}/`))) await temporal.workflow.getHandle(w.workflowId).terminate('the benchmark ended').catch(() => undefined);
      }
      await connection.close();
    },
  };
}

/**
 * Installs the operator cluster-wide as the README does (deploy/install.yaml, the test bed's
 * Temporal address), with `replicas` pods and the given flags, and waits until they are Ready.
 */
export async function installOperator(f: Fleet, replicas: number, args: string[] = []): Promise<V1Pod[]> {
  const docs = parseAllDocuments(readFileSync(INSTALL, 'utf8'));
  for (const doc of docs) {
    if (doc.get('kind') !== 'Deployment') continue;
    doc.setIn(['spec', 'replicas'], replicas);
    const container = ['spec', 'template', 'spec', 'containers', 0];
    const argList = doc.getIn([...container, 'args']);
    if (isSeq(argList)) for (const a of args) argList.add(a);
    const envList = doc.getIn([...container, 'env']);
    if (isSeq(envList)) {
      const existing = envList.items.find((e) => isMap(e) && e.get('name') === 'TEMPORAL_ADDRESS');
      if (existing && isMap(existing)) existing.set('value', testbed().temporal.address);
      else envList.add(doc.createNode({ name: 'TEMPORAL_ADDRESS', value: testbed().temporal.address }));
    }
  }
  const file = join(testbed().dir, 'operator', 'bench-install.yaml');
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, docs.map((d) => d.toString()).join('---\n'));
  const r = await kubectl(['apply', '-f', file]);
  if (r.code !== 0) throw new Error(`kubectl apply of deploy/install.yaml failed: ${r.stderr}`);
  return operatorReady(f, replicas);
}

/** Waits until the Deployment has `n` Ready pods and no other. */
export async function operatorReady(f: Fleet, n: number): Promise<V1Pod[]> {
  await f.apps.patchNamespacedDeploymentScale({ namespace: OPERATOR_NS, name: 'queen-operator', body: { spec: { replicas: n } } }, mergePatch());
  return waitFor(
    `${n} operator pods Ready`,
    async () => {
      const pods = (await f.core.listNamespacedPod({ namespace: OPERATOR_NS, labelSelector: OPERATOR_LABEL })).items;
      const ready = pods.filter((p) => !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
      return ready.length === n && pods.length === n ? ready : undefined;
    },
    300_000,
  );
}

/** A merge patch (the scale subresource and the QueenClusters take one). */
export const mergePatch = () => setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Creates `count` clusters spread over the namespaces, `parallel` at a time. */
export async function createClusters(f: Fleet, count: number, spec: QueenClusterSpec, parallel = 20): Promise<void> {
  const todo = Array.from({ length: count }, (_, i) => ({ ns: f.namespaces[i % f.namespaces.length]!, name: `q${String(i).padStart(3, '0')}` }));
  f.clusters.push(...todo);
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < todo.length) {
        const c = todo[next++]!;
        await f.custom.createNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: c.ns,
          plural: PLURAL,
          body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'QueenCluster', metadata: { name: c.name, namespace: c.ns }, spec },
        });
      }
    }),
  );
}

/** Every QueenCluster of the fleet's namespaces. */
export async function listClusters(f: Fleet): Promise<QueenCluster[]> {
  const all: QueenCluster[] = [];
  for (const ns of f.namespaces) {
    const list = (await f.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL })) as { items: QueenCluster[] };
    all.push(...list.items);
  }
  return all;
}

/** Waits until every cluster is Ready and commits; says how many are not when it runs out. */
export async function allReady(f: Fleet, timeoutMs: number, ok: (q: QueenCluster) => boolean = () => true): Promise<void> {
  let last = '';
  await waitFor(
    `all ${f.clusters.length} clusters Ready`,
    async () => {
      const list = await listClusters(f);
      const ready = list.filter((q) => q.status?.phase === 'Ready' && q.status?.commits === true && ok(q));
      const phases = new Map<string, number>();
      for (const q of list) phases.set(q.status?.phase ?? 'none', (phases.get(q.status?.phase ?? 'none') ?? 0) + 1);
      last = `${ready.length} Ready of ${list.length}: ${JSON.stringify(Object.fromEntries(phases))}`;
      return ready.length === f.clusters.length;
    },
    timeoutMs,
    () => last,
  );
}

// ---- the operator's pods, from the outside ------------------------------------------------------

export interface PodSample {
  pod: string;
  rssBytes: number;
  /** CPU time used so far (user + system), in seconds. */
  cpuSeconds: number;
  /** The same, per kind of thread (THREAD_KINDS), in seconds. */
  threadSeconds: Record<string, number>;
}

const TICKS = 100; // USER_HZ

/**
 * What the operator process's threads are, by their names: its JavaScript (the event loop; the
 * workflows run in a worker thread of their own), V8's collector and compiler helpers, the
 * Temporal SDK's core (Rust, tokio), libuv's pool (file system, the system's DNS lookups).
 */
const THREAD_KINDS: [RegExp, string][] = [
  [/^(node|MainThread)$/, 'JavaScript'],
  [/^(WorkerThread|workflow-)/, 'workflows'],
  [/^V8 ?Worker|^DelayedTask/, 'V8 (collector)'],
  [/^tokio|^temporal/, 'Temporal core'],
  [/^libuv/, 'libuv pool'],
];

/** user + system CPU seconds of one /proc/.../stat line (the fields after the command's name). */
function statSeconds(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}

/** CPU seconds of a process's threads, summed per kind (THREAD_KINDS; "other" for the rest). */
function threadSeconds(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const kind = THREAD_KINDS.find(([re]) => re.test(comm))?.[1] ?? 'other';
      out[kind] = (out[kind] ?? 0) + statSeconds(stat);
    } catch {
      // the thread just ended
    }
  }
  return out;
}

/** A process's resident memory and CPU time so far, in all and per kind of thread, from /proc. */
export function processUsage(pid: number): Omit<PodSample, 'pod'> {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return {
    rssBytes: Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024,
    cpuSeconds: statSeconds(readFileSync(`/proc/${pid}/stat`, 'utf8')),
    threadSeconds: threadSeconds(pid),
  };
}

/** Resident memory and CPU time of each operator pod's process, from /proc. */
export async function samplePods(f: Fleet): Promise<PodSample[]> {
  const pods = (await f.core.listNamespacedPod({ namespace: OPERATOR_NS, labelSelector: OPERATOR_LABEL })).items.filter((p) => !p.metadata?.deletionTimestamp);
  const out: PodSample[] = [];
  for (const p of pods) {
    const info = await control.pod(OPERATOR_NS, p.metadata!.name!).catch(() => null);
    if (!info?.pid) continue;
    try {
      out.push({ pod: p.metadata!.name!, ...processUsage(info.pid) });
    } catch {
      // the process just went
    }
  }
  return out.sort((a, b) => a.pod.localeCompare(b.pod));
}

/** One pod's /metrics, parsed into `name{labels}` → value. */
export async function scrape(f: Fleet, pod: string): Promise<Map<string, number>> {
  const p = await f.core.readNamespacedPod({ namespace: OPERATOR_NS, name: pod });
  const res = await fetch(`http://${p.status!.podIP}:9090/metrics`, { signal: AbortSignal.timeout(10_000) });
  return metricSamples(await res.text());
}

export { metricSum as sum };

/** Every operator pod's metrics. */
export async function scrapeAll(f: Fleet): Promise<Map<string, Map<string, number>>> {
  const pods = (await f.core.listNamespacedPod({ namespace: OPERATOR_NS, labelSelector: OPERATOR_LABEL })).items.filter((p) => !p.metadata?.deletionTimestamp);
  const out = new Map<string, Map<string, number>>();
  for (const p of pods) out.set(p.metadata!.name!, await scrape(f, p.metadata!.name!).catch(() => new Map()));
  return out;
}

// ---- Temporal ------------------------------------------------------------------------------------

export interface HistoryCount {
  events: number;
  timers: number;
  activities: number;
}

/** The history events of a workflow id's runs that happened between `from` and `to` (ms). */
export async function eventsBetween(f: Fleet, workflowId: string, from: number, to: number): Promise<HistoryCount> {
  const out: HistoryCount = { events: 0, timers: 0, activities: 0 };
  for await (const w of f.temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    if (w.closeTime && w.closeTime.getTime() < from) continue;
    if (w.startTime.getTime() > to) continue;
    const history = await f.temporal.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
    for (const e of history.events ?? []) {
      const at = eventTimeMs(e.eventTime);
      if (at < from || at > to) continue;
      out.events++;
      if (e.timerStartedEventAttributes) out.timers++;
      if (e.activityTaskScheduledEventAttributes) out.activities++;
    }
  }
  return out;
}

/**
 * When each cluster's status first shows a running operation of `type` (its first step began),
 * from a watch on the QueenClusters: for the spec-change-to-first-step latency.
 */
export function firstSteps(f: Fleet, type: string) {
  const seen = new Map<string, number>();
  const inf = makeInformer<KubernetesObject>(f.kc, `/apis/${GROUP}/${VERSION}/${PLURAL}`, () =>
    f.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL }) as never,
  );
  const look = (obj: KubernetesObject) => {
    const q = obj as unknown as QueenCluster;
    const key = `${q.metadata.namespace}/${q.metadata.name}`;
    if (q.status?.operation?.type === type && !seen.has(key)) seen.set(key, Date.now());
  };
  inf.on('update', look);
  inf.on('add', look);
  return {
    async start() {
      await inf.start();
    },
    /** Forget what was seen (before the next round of operations). */
    reset() {
      seen.clear();
    },
    at: (key: string) => seen.get(key),
    stop: () => inf.stop(),
  };
}

/**
 * The restarts of the clusters' broker pods, from a watch on the pods: for each cluster
 * (namespace/name), the time its pods were restarting, each from its pod first seen deleting until
 * the successor of that name was seen Ready. The part of an upgrade that is the test bed's (the
 * kubelet stand-in stopping and starting the brokers), not the operator's. The same span as
 * measure.ts `restarts`, which polls one namespace every 50 ms; here one watch serves them all.
 */
export function podRestarts(f: Fleet) {
  const deleting = new Map<string, { uid: string; at: number }>();
  const restartMs = new Map<string, number>();
  const inf = makeInformer<KubernetesObject>(f.kc, '/api/v1/pods', () => f.core.listPodForAllNamespaces() as never);
  const look = (obj: KubernetesObject) => {
    const pod = obj as V1Pod;
    const ns = pod.metadata?.namespace ?? '';
    if (!f.namespaces.includes(ns)) return;
    const key = `${ns}/${pod.metadata!.name}`;
    const cluster = key.replace(/-\d+$/, '');
    const now = Date.now();
    if (pod.metadata?.deletionTimestamp) {
      if (!deleting.has(key)) deleting.set(key, { uid: pod.metadata.uid!, at: now });
      return;
    }
    const was = deleting.get(key);
    const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    if (was && was.uid !== pod.metadata?.uid && ready) {
      deleting.delete(key);
      restartMs.set(cluster, (restartMs.get(cluster) ?? 0) + (now - was.at));
    }
  };
  inf.on('update', look);
  inf.on('add', look);
  return {
    start: () => inf.start(),
    stop: () => inf.stop(),
    /** The time a cluster's pods spent restarting (ms), summed over its pods. */
    of: (cluster: string) => restartMs.get(cluster) ?? null,
  };
}

/** The q-quantile of numbers (nearest rank). */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export { sleep };
