// What an end-to-end scenario needs: its own namespace with the Secret of seed 000, the operator
// installed there as users install it (deploy/namespaced.yaml: its pods run from the image the
// Dockerfile builds, under the ServiceAccount and role of the manifest), or, for a scenario that
// must control a process by hand, an operator process; the QueenCluster as kubectl shows it, its
// Events, the Temporal client, and waits with deadlines that say what was last seen when they run
// out.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions, type CoreV1Event, type V1Pod } from '@kubernetes/client-node';
import { Client, Connection } from '@temporalio/client';
import { inject } from 'vitest';
import { isMap, isSeq, parseAllDocuments } from 'yaml';
import { expect } from 'vitest';
import { isNotFound, PooledKubeConfig } from '../../activities/kube.ts';
import { GROUP, PLURAL, VERSION, type QueenCluster, type QueenClusterSpec } from '../../crd/schema.ts';
import { HEAVY_FILES, holdHeavySlotForFile } from '../heavy.ts';
import { control } from '../testbed/client.ts';
import { Informer, Kube, type KObject } from '../testbed/kube.ts';
import { authOf, startLoad, verifyAcknowledged, type Load, type LoadReport } from '../testbed/load.ts';

const MAIN = fileURLToPath(new URL('../../main.ts', import.meta.url));
const NAMESPACED = fileURLToPath(new URL('../../deploy/namespaced.yaml', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export const testbed = () => inject('testbed');
export const operatorSetup = () => inject('operator');

/** The test bed's admin kubeconfig; its requests share their connections, as the operator's do. */
export function adminKubeConfig(): KubeConfig {
  const kc = new PooledKubeConfig();
  kc.loadFromFile(testbed().kubeconfigPath);
  return kc;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns a value (not undefined/false), or fails saying what it saw last. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs: number, lastSeen?: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const seen = lastSeen ? lastSeen() : lastError ? String(lastError) : '';
      throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}${seen ? `; last seen: ${seen}` : ''}`);
    }
    await sleep(250);
  }
}

export interface OperatorFlags {
  /** How the operator reaches the brokers: their pod IPs (default) or their names, through the test bed's DNS. */
  brokerAccess?: 'pod-ip' | 'dns';
  pollInterval?: string;
  observeInterval?: string;
  probeInterval?: string;
  stallAfter?: string;
  settleTimeout?: string;
  extra?: string[];
  /** Environment of an operator process, beside the test's own. */
  env?: Record<string, string>;
}

/** The flags a scenario gives the operator, as command-line arguments (tests run on shorter intervals). */
function flagArgs(flags: OperatorFlags): string[] {
  return [
    `--poll-interval=${flags.pollInterval ?? '500ms'}`,
    `--observe-interval=${flags.observeInterval ?? '1s'}`,
    `--probe-interval=${flags.probeInterval ?? '10s'}`,
    `--stall-after=${flags.stallAfter ?? '5s'}`,
    `--settle-timeout=${flags.settleTimeout ?? '5m'}`,
    ...(flags.extra ?? []),
  ];
}

/** Operator processes still running: killed when the test process exits, whatever the way. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of live) p.kill('SIGKILL');
});

/** One operator process (watcher and worker), as `npm start` runs it, for one namespace. */
export class OperatorProcess {
  readonly logPath: string;
  private proc: ChildProcess | null = null;
  private exited: Promise<number | null> | null = null;
  private readonly args: string[];
  private readonly env: Record<string, string>;
  readonly namespace: string;
  readonly label: string;

  constructor(namespace: string, label: string, taskQueue: string, flags: OperatorFlags = {}) {
    this.namespace = namespace;
    this.label = label;
    this.env = flags.env ?? {};
    const dir = join(testbed().dir, 'operator', namespace);
    mkdirSync(dir, { recursive: true });
    this.logPath = join(dir, `${label}.log`);
    this.args = [
      MAIN,
      `--kubeconfig=${operatorSetup().kubeconfig}`,
      `--temporal-address=${testbed().temporal.address}`,
      `--task-queue=${taskQueue}`,
      `--namespace=${namespace}`,
      ...(flags.brokerAccess === 'dns' ? ['--broker-access=dns', `--resolver=${testbed().dns}`] : ['--broker-access=pod-ip']),
      `--workflow-bundle=${operatorSetup().workflowBundle}`,
      '--health-port=0',
      '--metrics-port=0',
      ...flagArgs(flags),
    ];
  }

  start(): this {
    const fd = openSync(this.logPath, 'a');
    this.proc = spawn(process.execPath, this.args, { stdio: ['ignore', fd, fd], env: { ...process.env, LOG_LEVEL: 'debug', ...this.env } });
    closeSync(fd);
    const p = this.proc;
    live.add(p);
    this.exited = new Promise((resolve) =>
      p.once('exit', (code) => {
        live.delete(p);
        resolve(code);
      }),
    );
    return this;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /** Stops it the hard way (a crash) or gracefully. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill(signal);
    const timer = setTimeout(() => this.proc?.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(timer);
  }

  log(): string {
    return existsSync(this.logPath) ? readFileSync(this.logPath, 'utf8') : '';
  }
}

/**
 * The operator installed in a scenario's namespace from deploy/namespaced.yaml, as a team would
 * install it: `kubectl -n <ns> apply -f deploy/namespaced.yaml` with the Temporal address of the
 * test bed, the scenario's flags added to its arguments and its replica count set. Its pods run
 * from the operator's image (built from the Dockerfile) with the in-cluster configuration, the
 * cluster DNS and the manifest's probes.
 */
export class InstalledOperator {
  readonly namespace: string;
  constructor(namespace: string) {
    this.namespace = namespace;
  }

  /** The manifest as applied: replicas, the Temporal address, the scenario's flags. */
  static manifest(temporalAddress: string, replicas: number, args: string[], env: Record<string, string> = {}, uncomment?: RegExp): string {
    // Lines the manifest offers commented out (e.g. the TLS to Temporal), uncommented as its comments tell a user to.
    const text = readFileSync(NAMESPACED, 'utf8')
      .split('\n')
      .map((l) => (uncomment && uncomment.test(l) ? l.replace(/^(\s*)# /, '$1') : l))
      .join('\n');
    const docs = parseAllDocuments(text);
    for (const doc of docs) {
      if (doc.get('kind') !== 'Deployment') continue;
      doc.setIn(['spec', 'replicas'], replicas);
      const container = ['spec', 'template', 'spec', 'containers', 0];
      const argList = doc.getIn([...container, 'args']);
      if (isSeq(argList)) for (const a of args) argList.add(a);
      const envList = doc.getIn([...container, 'env']);
      const all = { TEMPORAL_ADDRESS: temporalAddress, LOG_LEVEL: 'debug', ...env };
      if (isSeq(envList)) {
        for (const [name, value] of Object.entries(all)) {
          const existing = envList.items.find((e) => isMap(e) && e.get('name') === name);
          if (existing && isMap(existing)) existing.set('value', value);
          else envList.add(doc.createNode({ name, value }));
        }
      }
    }
    return docs.map((d) => d.toString()).join('---\n');
  }

  async apply(replicas: number, flags: OperatorFlags, env: Record<string, string> = {}, uncomment?: RegExp): Promise<void> {
    const file = join(testbed().dir, 'operator', `${this.namespace}.yaml`);
    mkdirSync(join(file, '..'), { recursive: true });
    writeFileSync(file, InstalledOperator.manifest(testbed().temporal.address, replicas, flagArgs(flags), env, uncomment));
    const r = await kubectl(['-n', this.namespace, 'apply', '-f', file]);
    if (r.code !== 0) throw new Error(`kubectl apply of deploy/namespaced.yaml failed: ${r.stderr}`);
  }

  /** Deletes its Deployment (its pods get SIGTERM) and waits until its pods are gone. */
  async remove(apps: AppsV1Api, core: CoreV1Api): Promise<void> {
    await apps.deleteNamespacedDeployment({ namespace: this.namespace, name: 'queen-operator', propagationPolicy: 'Foreground' }).catch((err) => {
      if (!isNotFound(err)) throw err;
    });
    await waitFor('the installed operator pods gone', async () => (await this.pods(core)).length === 0, 60_000);
  }

  /** The operator's pods (Terminating ones too), oldest first. */
  async pods(core: CoreV1Api): Promise<V1Pod[]> {
    const list = await core.listNamespacedPod({ namespace: this.namespace, labelSelector: 'app.kubernetes.io/name=queen-operator' });
    return list.items.sort((a, b) => time0(a) - time0(b));
  }

  /** Waits until `n` pods are Ready through /readyz and none is terminating. */
  async ready(core: CoreV1Api, n: number, timeoutMs = 180_000): Promise<V1Pod[]> {
    let last = '';
    return waitFor(
      `${n} operator pod${n === 1 ? '' : 's'} Ready`,
      async () => {
        const pods = await this.pods(core);
        last = pods.map((p) => `${p.metadata?.name} ${p.status?.phase}${p.metadata?.deletionTimestamp ? ' terminating' : ''} ready=${isReady(p)}`).join(', ');
        const ready = pods.filter((p) => !p.metadata?.deletionTimestamp && isReady(p));
        return ready.length === n && pods.length === n ? ready : undefined;
      },
      timeoutMs,
      () => `${last}\n${this.log().split('\n').slice(-15).join('\n')}`,
    );
  }

  /** Everything every operator pod of this namespace wrote, in the order of the files. */
  log(): string {
    const dir = join(testbed().logs, 'pods');
    if (!existsSync(dir)) return '';
    return readdirSync(dir)
      .filter((f) => f.startsWith(`${this.namespace}_queen-operator-`) && f.endsWith('_operator.log'))
      .map((f) => readFileSync(join(dir, f), 'utf8'))
      .join('\n');
  }
}

/** The samples of a Prometheus exposition: `name{labels}` → value. */
export function metricSamples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^(\S+?(?:\{.*\})?)\s+(\S+)$/.exec(line);
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

/** The sum of the samples of a family whose labels contain every `label="value"` given. */
export function metricSum(m: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const [key, v] of m) {
    if (key !== name && !key.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, val]) => key.includes(`${k}="${val}"`))) total += v;
  }
  return total;
}

/** The sum of a family over every running operator pod of the namespace (its /metrics at its pod IP, port 9090). */
export async function operatorMetricSum(s: Scenario, name: string, labels: Record<string, string> = {}): Promise<number> {
  const pods = (await new InstalledOperator(s.ns).pods(s.core)).filter((p) => p.status?.podIP && !p.metadata?.deletionTimestamp);
  let total = 0;
  for (const p of pods) total += metricSum(metricSamples(await (await fetch(`http://${p.status!.podIP}:9090/metrics`)).text()), name, labels);
  return total;
}

const time0 = (p: V1Pod) => new Date((p.metadata?.creationTimestamp ?? 0) as Date).getTime();
const isReady = (p: V1Pod) => !!p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');

export interface Scenario {
  ns: string;
  kc: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  temporal: Client;
  taskQueue: string;
  operators: OperatorProcess[];
  /** The operator installed in the namespace, once install() ran. */
  installed: InstalledOperator | null;
  /** Names of the QueenClusters created through createCluster(). */
  clusters: Set<string>;
  /**
   * Installs the operator in the namespace (deploy/namespaced.yaml) with `replicas` pods and the
   * scenario's flags, and waits until they are Ready. Again: changes the replicas or the flags.
   */
  /** `uncomment`: the manifest's commented lines that match it are uncommented (as docs/temporal.md tells for TLS). */
  install(flags?: OperatorFlags, opts?: { replicas?: number; env?: Record<string, string>; uncomment?: RegExp }): Promise<InstalledOperator>;
  /**
   * Removes the installed operator (its Deployment, then waits for its pods to go), so that an
   * operator the scenario starts next is the only one acting on its clusters. Its log stays readable.
   */
  uninstall(): Promise<void>;
  /** An operator process on this machine, for a scenario that must control it by hand. */
  startOperator(label?: string, flags?: OperatorFlags): OperatorProcess;
  /** The logs of every operator of the scenario, installed or process. */
  operatorLog(): string;
  /** Something close() does first (lifting what the scenario put on the test bed outside its namespace). */
  onClose(fn: () => Promise<void>): void;
  close(): Promise<void>;
}

let counter = 0;

/**
 * The simulator settings every scenario's brokers run with (the test bed is not kinder than
 * production): messages of 4 KiB, a link of 20 MB/s to each follower, a boot that replays 50 MB/s
 * (simulated time, × the time factor). Scenarios that need a large store take BIG_STORE.
 */
export const REALISTIC_SIM: Record<string, string> = { QUEEN_SIM_ENTRY_BYTES: '4Ki', QUEEN_SIM_BANDWIDTH: '20M', QUEEN_SIM_REPLAY_RATE: '50M' };
/**
 * Messages of 16 KiB, a link of 3 MB/s to each follower and a replay of 8 MB/s (15 and 40 MB/s at
 * the time factor 0.2; the link carries 500 messages a second with room to spare): with
 * buildStore(s, 12000), about 200 MB, a restarted pod replays for about 5 s before it serves (more
 * as the load grows the store: by 3.3 MB a second at 200 pushes a second; at 4 MB/s the fifth pod
 * of an upgrade of five replayed for 50 s, and the scenario spent most of its time there), and
 * a new learner's snapshot (the log is kept for 1000 entries past the store, so a learner gets one)
 * crosses the link in about 13 s, within the 60 s + size / 10 MB/s the broker gives it, then the
 * learner restarts (exit 75) and replays it.
 */
export const BIG_STORE: Record<string, string> = { QUEEN_SIM_ENTRY_BYTES: '16Ki', QUEEN_SIM_BANDWIDTH: '3M', QUEEN_SIM_REPLAY_RATE: '8M', QUEEN_RAFT_LOG_KEEP: '1000' };
export const BIG_STORE_MESSAGES = 12_000;
/**
 * BIG_STORE on a link of 4 MB/s instead of 3 (20 MB/s at the time factor 0.2), for a replacement
 * under 200 pushes a second. The broker gives a snapshot 60 s + size / 10 MB/s to cross, so a link
 * slower than 10 MB/s has a largest snapshot it can ever carry: about 257 MB at 3 MB/s, 400 MB at
 * 4 MB/s. At 200 pushes a second of 16 KiB the store grows by 3.3 MB a second from about 216 MB,
 * and the new learner of a replacement asks for its snapshot some 15 s into the load: at 3 MB/s
 * that first snapshot (263 MB, 17.5 s against a limit of 17.3 s) timed out, and every retry was
 * bigger. At 4 MB/s it crosses in about 13 s, as BIG_STORE's 200 MB does at 3 MB/s, with room for
 * a slower start. The log keep stays 1000, so the learner still gets a snapshot (with the broker's
 * default of 4096 the leader had not purged anything yet, and the learner copied the log instead).
 */
export const REPLACE_STORE: Record<string, string> = { ...BIG_STORE, QUEEN_SIM_BANDWIDTH: '4M' };

/**
 * A namespace of its own with the Secret of seed 000, and a Temporal client. With `namespace`, a
 * namespace of that name that the test itself creates (as a user would). `sim`: the simulator
 * settings of its brokers (default REALISTIC_SIM).
 */
export async function scenario(prefix: string, opts: { secret?: boolean; namespace?: string; sim?: Record<string, string> } = {}): Promise<Scenario> {
  const kc = adminKubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const ns = opts.namespace ?? `${prefix}-${process.pid.toString(36)}${(counter++).toString(36)}${Date.now().toString(36).slice(-4)}`;
  // The first scenario of a heavy file waits for the test bed's heavy slot, which the file holds to
  // its end (test/heavy.ts).
  const testFile = relative(ROOT, expect.getState().testPath ?? '');
  const slot = HEAVY_FILES.has(testFile) ? await holdHeavySlotForFile(testbed().dir, testFile, ns) : null;
  if (slot && slot.waitedMs >= 1000) console.log(`${ns}: waited ${Math.round(slot.waitedMs / 1000)}s for the heavy slot`);
  await control.setSimEnv(ns, opts.sim ?? REALISTIC_SIM);
  if (!opts.namespace) await core.createNamespace({ body: { metadata: { name: ns } } });
  if (opts.secret !== false && !opts.namespace) await createSecret(core, ns);
  const connection = await Connection.connect({ address: testbed().temporal.address });
  const temporal = new Client({ connection, namespace: testbed().temporal.namespace });
  const taskQueue = `queen-${ns}`;
  const operators: OperatorProcess[] = [];
  const clusters = new Set<string>();
  const closing: (() => Promise<void>)[] = [];
  const s: Scenario = {
    ns,
    kc,
    core,
    custom,
    temporal,
    taskQueue,
    operators,
    installed: null,
    clusters,
    async install(flags: OperatorFlags = {}, opts: { replicas?: number; env?: Record<string, string>; uncomment?: RegExp } = {}) {
      const op = (s.installed ??= new InstalledOperator(ns));
      const replicas = opts.replicas ?? 1;
      await op.apply(replicas, flags, opts.env, opts.uncomment);
      await op.ready(core, replicas);
      return op;
    },
    async uninstall() {
      await s.installed?.remove(s.kc.makeApiClient(AppsV1Api), core);
    },
    operatorLog() {
      return [s.installed?.log() ?? '', ...operators.map((o) => o.log())].join('\n');
    },
    startOperator(label = `operator-${operators.length}`, flags?: OperatorFlags) {
      const op = new OperatorProcess(ns, label, taskQueue, flags).start();
      operators.push(op);
      return op;
    },
    onClose(fn) {
      closing.push(fn);
    },
    async close() {
      await closeScenario();
    },
  };
  async function closeScenario() {
    for (const fn of closing.splice(0)) await fn().catch(() => undefined);
    await Promise.all(operators.map((o) => o.kill('SIGTERM')));
    // The installed operator stops first (SIGTERM, then its pods go), so it restarts nothing below.
    await s.uninstall().catch(() => undefined);
    // Workflows nobody works on any more are ended, so the Temporal server carries no leftovers.
    for (const name of clusters) {
      for (const id of [`queencluster/${ns}/${name}`, `queencluster-observer/${ns}/${name}`]) {
        await temporal.workflow.getHandle(id).terminate('the test scenario ended').catch(() => undefined);
      }
    }
    await connection.close();
    // The namespace goes with its pods; the observer workflow ends once its QueenCluster is gone.
    await core.deleteNamespace({ name: ns }).catch(() => undefined);
  }
  return s;
}

export async function createSecret(core: CoreV1Api, ns: string, data: Record<string, string> = { QUEEN_RAFT_TOKEN: 'a'.repeat(64), QUEEN_ENCRYPTION_KEY: 'b'.repeat(64) }) {
  await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'queen' }, stringData: data } });
}

/** The spec of seed 000's example, with small requests so several clusters fit the simulated nodes. */
export function seedSpec(over: Partial<QueenClusterSpec> = {}): QueenClusterSpec {
  return {
    version: '2.6.0',
    replicas: 3,
    secretName: 'queen',
    storage: { size: '1Gi' },
    resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
    minReadySeconds: 5,
    ...over,
  };
}

export async function createCluster(s: Scenario, spec: QueenClusterSpec, name = 'queen'): Promise<QueenCluster> {
  s.clusters.add(name);
  return (await s.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: s.ns,
    plural: PLURAL,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'QueenCluster', metadata: { name, namespace: s.ns }, spec },
  })) as QueenCluster;
}

export async function getCluster(s: Scenario, name = 'queen'): Promise<QueenCluster> {
  return (await s.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: s.ns, plural: PLURAL, name })) as QueenCluster;
}

export async function patchSpec(s: Scenario, spec: Partial<QueenClusterSpec>, name = 'queen') {
  await s.custom.patchNamespacedCustomObject(
    { group: GROUP, version: VERSION, namespace: s.ns, plural: PLURAL, name, body: { spec } },
    mergePatchOptions(),
  );
}

export async function annotate(s: Scenario, annotations: Record<string, string | null>, name = 'queen') {
  await s.custom.patchNamespacedCustomObject(
    { group: GROUP, version: VERSION, namespace: s.ns, plural: PLURAL, name, body: { metadata: { annotations } } },
    mergePatchOptions(),
  );
}

const mergePatchOptions = () => setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The status as `kubectl get queencluster` prints it. */
export function row(qc: QueenCluster): string {
  const st = qc.status ?? {};
  return `version=${st.version ?? ''} voters=${JSON.stringify(st.voters ?? [])} leader=${st.leader ?? ''} term=${st.term ?? ''} commits=${st.commits ?? ''} phase=${st.phase ?? ''} message=${st.message ?? ''}`;
}

/** Waits until the QueenCluster's status satisfies `ok`; the error says the last status seen. */
export async function waitForCluster(s: Scenario, what: string, ok: (qc: QueenCluster) => boolean, timeoutMs: number, name = 'queen'): Promise<QueenCluster> {
  let last: QueenCluster | null = null;
  try {
    return await waitFor(
      what,
      async () => {
        last = await getCluster(s, name);
        return ok(last) ? last : undefined;
      },
      timeoutMs,
      () => (last ? row(last) : 'no QueenCluster'),
    );
  } catch (err) {
    // What the brokers said of their elections meanwhile: a wait that ran out is explained by it.
    const lines = raftEvents(s, name, Date.now() - Math.min(timeoutMs, 120_000), Date.now());
    console.log(`${what}: the brokers' raft lines of the last ${Math.min(timeoutMs, 120_000) / 1000} s (${lines.length}):\n${lines.slice(-80).join('\n')}`);
    // The error itself carries the pods and the last of those lines: a run whose output is kept
    // only in part (a CI log's tail) still shows why the wait ran out.
    const podLines = await pods(s, name)
      .then((list) => list.map(podLine))
      .catch((e: unknown) => [`pods not listed: ${String(e)}`]);
    const tail = lines.slice(-15).map((l) => `  ${l.slice(0, 240)}`);
    throw new Error(`${(err as Error).message}\npods:\n${podLines.map((l) => `  ${l}`).join('\n')}\nthe brokers' last raft lines (${tail.length} of ${lines.length}):\n${tail.join('\n')}`);
  }
}

/** One pod as `kubectl get pods -o wide` would show it: name, phase, Ready, restarts, IP. */
function podLine(p: V1Pod): string {
  const ready = p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
  const restarts = (p.status?.containerStatuses ?? []).reduce((n, c) => n + c.restartCount, 0);
  return `${p.metadata?.name} ${p.status?.phase ?? '?'} ready=${ready} restarts=${restarts} ip=${p.status?.podIP ?? ''}${p.metadata?.deletionTimestamp ? ' terminating' : ''}`;
}

/** The Events of the QueenCluster in the order they happened, as `kubectl describe` lists them. */
export async function clusterEvents(s: Scenario, name = 'queen'): Promise<CoreV1Event[]> {
  const list = await s.core.listNamespacedEvent({ namespace: s.ns, fieldSelector: `involvedObject.kind=QueenCluster,involvedObject.name=${name}` });
  // Timestamps are whole seconds: two Events of one second go in the order the API server stored
  // them (the test bed's resourceVersions are etcd revisions, which only grow).
  return list.items.sort((a, b) => time(a) - time(b) || Number(a.metadata?.resourceVersion ?? 0) - Number(b.metadata?.resourceVersion ?? 0));
}

const time = (e: CoreV1Event) => new Date((e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? 0) as Date).getTime();

export async function pods(s: Scenario, name = 'queen'): Promise<V1Pod[]> {
  const list = await s.core.listNamespacedPod({ namespace: s.ns, labelSelector: `app.kubernetes.io/instance=${name}` });
  return list.items.sort((a, b) => a.metadata!.name!.localeCompare(b.metadata!.name!));
}

export async function kubectl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const tb = testbed();
  return new Promise((resolve) => {
    const p = spawn(tb.tools.kubectl, [`--kubeconfig=${tb.kubeconfigPath}`, ...args]);
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** Installs the operator (unless one runs) and forms a cluster; returns once it is Ready and commits. */
export async function formed(s: Scenario, spec: QueenClusterSpec, name = 'queen'): Promise<QueenCluster> {
  if (s.operators.length === 0 && !s.installed) await s.install();
  await createCluster(s, spec, name);
  const voters = JSON.stringify(Array.from({ length: spec.replicas ?? 3 }, (_, i) => i + 1));
  return waitForCluster(
    s,
    'the cluster Ready',
    (q) => q.status?.phase === 'Ready' && q.status?.commits === true && JSON.stringify(q.status?.voters) === voters && !!q.status?.version,
    240_000,
    name,
  );
}

/**
 * A store of `messages` messages (× the namespace's message size): pushed through the client
 * Service at 500 a second, 50 pushes of 10, and all acknowledged.
 */
export async function buildStore(s: Scenario, messages: number): Promise<void> {
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 500, batch: 10, queue: 'store' });
  await waitFor(`${messages} messages of history acknowledged`, async () => load.progress().acknowledged >= messages, 300_000, () => JSON.stringify(load.progress()));
  const report = await load.stop();
  if (report.unacknowledged.length) throw new Error(`the store's messages were not all acknowledged: ${report.unacknowledged.length} left`);
}

/** The pod IPs of the voters, from the API server. */
export async function voterIps(s: Scenario, name = 'queen'): Promise<string[]> {
  const qc = await getCluster(s, name);
  const voters = new Set((qc.status?.voters ?? []).map((id) => `${name}-${id - 1}`));
  return (await pods(s, name)).filter((p) => voters.has(p.metadata!.name!)).map((p) => p.status!.podIP!);
}

export interface Monitor {
  /** status.message values in the order they were first seen (consecutive repeats folded). */
  messages: string[];
  /** phase values in order (consecutive repeats folded). */
  phases: string[];
  /** "phase: message" in order (consecutive repeats folded), with the time since the start. */
  timeline: string[];
  /** For each pod name, the UIDs it had, in order. */
  uids: Map<string, string[]>;
  /** The most voter pods that were not Ready at one time. */
  maxNotReady: number;
  /** The most voters that were down at one time: their pod gone, stopping, or its container not running. */
  maxDown: number;
  /** (leader, term) pairs seen in status, in order. */
  leaders: { leader: number | null; term: number | null }[];
  /** When each write of the QueenCluster (a new resourceVersion) was seen (ms since the epoch). */
  writes: number[];
  /** For each write, the fields of spec, status and metadata it changed (`status.lag`, ...). */
  changed: string[][];
  stop(): Promise<void>;
}

/** The fields of spec, status and metadata (but its resourceVersion and managedFields) that differ, down to the fields of a list's items: `status.members[1].lag`. */
function changedFields(a: QueenCluster, b: QueenCluster): string[] {
  const out: string[] = [];
  const same = (x: unknown, y: unknown) => JSON.stringify(x) === JSON.stringify(y);
  const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);
  const diff = (path: string, x: unknown, y: unknown, depth: number) => {
    if (same(x, y)) return;
    if (depth > 0 && Array.isArray(x) && Array.isArray(y) && x.length === y.length) {
      x.forEach((v, i) => diff(`${path}[${i}]`, v, y[i], depth - 1));
    } else if (depth > 0 && isObject(x) && isObject(y)) {
      for (const k of new Set([...Object.keys(x), ...Object.keys(y)])) diff(`${path}.${k}`, x[k], y[k], depth - 1);
    } else out.push(path);
  };
  for (const part of ['metadata', 'spec', 'status'] as const) {
    const x = { ...((a[part] ?? {}) as Record<string, unknown>) };
    const y = { ...((b[part] ?? {}) as Record<string, unknown>) };
    if (part === 'metadata') for (const k of ['resourceVersion', 'managedFields']) delete x[k], delete y[k];
    diff(part, x, y, 3);
  }
  return out;
}

/**
 * Follows the QueenCluster and its pods through watches until stopped: every change is seen (none
 * falls between two samples), and the API server sends only what changed instead of a list of
 * pods five times a second per scenario. Resolves once both lists are in, so the first entries are
 * the state at the call and a change made after it is never missed.
 */
export async function monitor(s: Scenario, name = 'queen'): Promise<Monitor> {
  const m: Monitor = { messages: [], phases: [], timeline: [], uids: new Map(), maxNotReady: 0, maxDown: 0, leaders: [], writes: [], changed: [], stop: async () => undefined };
  let version = '';
  let lastSeen: QueenCluster | undefined;
  let lastLine = '';
  const began = Date.now();
  const kube = new Kube(authOf(s.kc));
  const clusters = new Informer<KObject>(kube, `/apis/${GROUP}/${VERSION}/namespaces/${s.ns}/${PLURAL}`, { query: { fieldSelector: `metadata.name=${name}` } });
  const podWatch = new Informer<KObject>(kube, `/api/v1/namespaces/${s.ns}/pods`, { query: { labelSelector: `app.kubernetes.io/instance=${name}` } });
  let synced = false;
  const look = () => {
    const qc = clusters.list()[0] as unknown as QueenCluster | undefined;
    if (!synced || !qc) return;
    if (version && qc.metadata.resourceVersion !== version) {
      m.writes.push(Date.now());
      m.changed.push(lastSeen ? changedFields(lastSeen, qc) : []);
    }
    version = qc.metadata.resourceVersion ?? '';
    lastSeen = qc;
    const list = (podWatch.list() as unknown as V1Pod[]).sort((a, b) => a.metadata!.name!.localeCompare(b.metadata!.name!));
    const msg = qc.status?.message ?? '';
    if (m.messages.at(-1) !== msg) m.messages.push(msg);
    const phase = qc.status?.phase ?? '';
    if (m.phases.at(-1) !== phase) m.phases.push(phase);
    const line = `${phase}: ${msg}`;
    if (lastLine !== line) m.timeline.push(`+${((Date.now() - began) / 1000).toFixed(1)}s ${line}`);
    lastLine = line;
    const l = { leader: qc.status?.leader ?? null, term: qc.status?.term ?? null };
    const lastL = m.leaders.at(-1);
    if (!lastL || lastL.leader !== l.leader || lastL.term !== l.term) m.leaders.push(l);
    const voters = new Set((qc.status?.voters ?? []).map((id) => `${name}-${id - 1}`));
    let notReady = 0;
    let down = 0;
    for (const v of voters) {
      const p = list.find((x) => x.metadata?.name === v);
      const ready = !!p && !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
      if (!ready) notReady++;
      const containers = p?.status?.containerStatuses ?? [];
      if (!p || p.metadata?.deletionTimestamp || containers.length === 0 || !containers.every((c) => c.state?.running)) down++;
    }
    m.maxNotReady = Math.max(m.maxNotReady, notReady);
    m.maxDown = Math.max(m.maxDown, down);
    for (const p of list) {
      const seen = m.uids.get(p.metadata!.name!) ?? [];
      if (seen.at(-1) !== p.metadata!.uid) seen.push(p.metadata!.uid!);
      m.uids.set(p.metadata!.name!, seen);
    }
  };
  clusters.on({ add: look, update: look });
  podWatch.on({ add: look, update: look, delete: look });
  // Both lists first: a cluster seen before its pods would count every voter not Ready.
  const ready = Promise.all([clusters.start(), podWatch.start()]).then(() => {
    synced = true;
    look();
  });
  let stopped = false;
  const end = async () => {
    if (stopped) return;
    stopped = true;
    clusters.stop();
    podWatch.stop();
    await kube.close();
  };
  m.stop = async () => {
    look();
    await end();
  };
  // A monitor a scenario never stopped ends with it.
  s.onClose(end);
  const listed = await Promise.race([ready.then(() => true), sleep(30_000).then(() => false)]);
  if (!listed) {
    await end();
    throw new Error(`monitor: the lists of ${PLURAL}/${name} and its pods in ${s.ns} did not come in 30 s`);
  }
  return m;
}

/**
 * A cluster's admission policy that refuses one kind of request in the scenario's namespace (a
 * ValidatingAdmissionPolicy and its binding, cluster-wide objects matched to this namespace): the
 * API server answers 403 with `message`. Returns what lifts it; scenario.close() lifts it too.
 */
export async function refuseByPolicy(
  s: Scenario,
  name: string,
  rule: { apiGroup: string; operation: 'UPDATE' | 'DELETE'; resource: string },
  message: string,
): Promise<() => Promise<void>> {
  const file = join(testbed().dir, `${name}-${s.ns}.yaml`);
  writeFileSync(
    file,
    `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: { name: ${name}-${s.ns} }
spec:
  failurePolicy: Fail
  matchConstraints: { resourceRules: [{ apiGroups: ["${rule.apiGroup}"], apiVersions: ["v1"], operations: ["${rule.operation}"], resources: ["${rule.resource}"] }] }
  validations:
    - expression: "false"
      message: "${message}"
      reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: { name: ${name}-${s.ns} }
spec:
  policyName: ${name}-${s.ns}
  validationActions: [Deny]
  matchResources: { namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: ${s.ns} } } }
`,
  );
  const r = await kubectl(['apply', '-f', file]);
  if (r.code !== 0) throw new Error(`the policy ${name} was not applied: ${r.stderr}`);
  let lifted = false;
  const lift = async () => {
    if (lifted) return;
    lifted = true;
    await kubectl(['delete', '--ignore-not-found', '-f', file]);
    // The API server drops (and loads) a policy within a few seconds.
    await sleep(5000);
  };
  s.onClose(lift);
  await sleep(3000);
  return lift;
}

/** A change freeze on the scenario's StatefulSets: every update of one is refused with 403 (refuseByPolicy). */
export const freezeStatefulSets = (s: Scenario) =>
  refuseByPolicy(s, 'freeze', { apiGroup: 'apps', operation: 'UPDATE', resource: 'statefulsets' }, 'StatefulSets are frozen by the change policy');

/** The rate the scenarios of every operation push at (issue 14: zero failed pushes at 200 a second). */
export const LOAD_RATE = 200;

/**
 * What the nodes of a cluster logged about leadership and their own ends between two instants
 * (elections, hand-offs, stops, signals), from their container logs in the test bed (the kubelet
 * stand-in writes `<namespace>_<pod>_<uid>_<container>.log`, one per container start): what a
 * failed push is read against (a leader change answers the writes in flight `outcome_unknown`).
 */
export function raftEvents(s: Scenario, name: string, from: number, to: number): string[] {
  const dir = join(testbed().dir, 'logs', 'pods');
  const pattern = /election|elected|leader|hand|quorum|stopped|SIGTERM|exiting|removed|snapshot|disk gate/i;
  const out: { at: number; line: string }[] = [];
  for (const file of existsSync(dir) ? readdirSync(dir) : []) {
    if (!file.startsWith(`${s.ns}_${name}-`) || /operator/.test(file)) continue;
    const pod = file.split('_')[1];
    for (const raw of readFileSync(join(dir, file), 'utf8').split('\n')) {
      let e: { ts?: string; msg?: string };
      try {
        e = JSON.parse(raw) as { ts?: string; msg?: string };
      } catch {
        continue;
      }
      const at = Date.parse(e.ts ?? '');
      if (at >= from && at <= to && pattern.test(e.msg ?? '')) out.push({ at, line: `${pod}: ${raw.slice(0, 300)}` });
    }
  }
  return out.sort((a, b) => a.at - b.at).map((x) => x.line);
}

/**
 * Stops the load and checks what a client saw: every push acknowledged on its first try, none
 * left unanswered, and every acknowledged message in the committed log of every voter. The
 * report is printed (with the failed attempts and the endpoints the client used, if any failed).
 */
export async function expectEveryPushFirstTry(s: Scenario, load: Load, what: string, name = 'queen'): Promise<LoadReport> {
  const report = await load.stop();
  const missing = await verifyAcknowledged(report, await voterIps(s, name));
  console.log(
    `${what}: ${report.acknowledged} acknowledged (${report.acknowledgedFirstTry} on the first try), ` +
      `${report.failedAttempts.length} failed attempts, ${report.unacknowledged.length} unanswered, ${missing.length} lost; ` +
      `pushes sent up to ${report.maxSendDelay.ms} ms late (the client's own process busy)`,
  );
  for (const f of report.failedAttempts.slice(0, 20)) console.log(`  failed: ${JSON.stringify(f)}`);
  // Unanswered pushes were never sent or never came back: the endpoints and the report say which.
  if (report.failedAttempts.length || report.unacknowledged.length) {
    for (const c of report.endpointChanges) console.log(`  endpoints at ${c.at}: ${c.endpoints.join(' ')}`);
    const file = join(testbed().dir, `load-${s.ns}-${Date.now()}.json`);
    writeFileSync(file, JSON.stringify({ ...report, acknowledgedIds: undefined }, null, 1));
    console.log(`  the whole report: ${file}`);
    const times = report.failedAttempts.flatMap((f) => [Date.parse(f.sentAt), Date.parse(f.at)]);
    if (times.length) for (const line of raftEvents(s, name, Math.min(...times) - 10_000, Math.max(...times) + 5_000)) console.log(`  ${line}`);
  }
  expect(report.acknowledged).toBeGreaterThan(0);
  expect(report.failedAttempts).toEqual([]);
  expect(report.acknowledgedFirstTry).toBe(report.acknowledged);
  expect(report.unacknowledged).toEqual([]);
  expect(missing).toEqual([]);
  return report;
}
