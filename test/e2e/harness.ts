// What an end-to-end scenario needs: its own namespace with the Secret of seed 000, operator
// processes run as a user would run them (under the ServiceAccount of deploy/install.yaml), the
// QueenCluster as kubectl shows it, its Events, the Temporal client, and waits with deadlines that
// say what was last seen when they run out.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions, type CoreV1Event, type V1Pod } from '@kubernetes/client-node';
import { Client, Connection } from '@temporalio/client';
import { inject } from 'vitest';
import { GROUP, PLURAL, VERSION, type QueenCluster, type QueenClusterSpec } from '../../crd/schema.ts';

const MAIN = fileURLToPath(new URL('../../main.ts', import.meta.url));

export const testbed = () => inject('testbed');
export const operatorSetup = () => inject('operator');

export function adminKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
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
  readonly namespace: string;
  readonly label: string;

  constructor(namespace: string, label: string, taskQueue: string, flags: OperatorFlags = {}) {
    this.namespace = namespace;
    this.label = label;
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
      `--state-dir=${dir}`,
      `--poll-interval=${flags.pollInterval ?? '500ms'}`,
      `--observe-interval=${flags.observeInterval ?? '1s'}`,
      `--probe-interval=${flags.probeInterval ?? '10s'}`,
      `--stall-after=${flags.stallAfter ?? '5s'}`,
      `--settle-timeout=${flags.settleTimeout ?? '5m'}`,
      ...(flags.extra ?? []),
    ];
  }

  start(): this {
    const fd = openSync(this.logPath, 'a');
    this.proc = spawn(process.execPath, this.args, { stdio: ['ignore', fd, fd], env: { ...process.env, LOG_LEVEL: 'debug' } });
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

export interface Scenario {
  ns: string;
  kc: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  temporal: Client;
  taskQueue: string;
  operators: OperatorProcess[];
  /** Names of the QueenClusters created through createCluster(). */
  clusters: Set<string>;
  startOperator(label?: string, flags?: OperatorFlags): OperatorProcess;
  close(): Promise<void>;
}

let counter = 0;

/** A namespace of its own with the Secret of seed 000, and a Temporal client. */
export async function scenario(prefix: string, opts: { secret?: boolean } = {}): Promise<Scenario> {
  const kc = adminKubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const ns = `${prefix}-${process.pid.toString(36)}${(counter++).toString(36)}${Date.now().toString(36).slice(-4)}`;
  await core.createNamespace({ body: { metadata: { name: ns } } });
  if (opts.secret !== false) await createSecret(core, ns);
  const connection = await Connection.connect({ address: testbed().temporal.address });
  const temporal = new Client({ connection, namespace: testbed().temporal.namespace });
  const taskQueue = `queen-${ns}`;
  const operators: OperatorProcess[] = [];
  const clusters = new Set<string>();
  return {
    ns,
    kc,
    core,
    custom,
    temporal,
    taskQueue,
    operators,
    clusters,
    startOperator(label = `operator-${operators.length}`, flags?: OperatorFlags) {
      const op = new OperatorProcess(ns, label, taskQueue, flags).start();
      operators.push(op);
      return op;
    },
    async close() {
      await Promise.all(operators.map((o) => o.kill('SIGTERM')));
      // Workflows nobody works on any more are ended, so the Temporal server carries no leftovers.
      for (const name of clusters) {
        for (const id of [`queencluster/${ns}/${name}`, `queencluster-observer/${ns}/${name}`]) {
          await temporal.workflow.getHandle(id).terminate('the test scenario ended').catch(() => undefined);
        }
      }
      await connection.close();
      // The namespace goes with its pods; the observer workflow ends once its QueenCluster is gone.
      await core.deleteNamespace({ name: ns }).catch(() => undefined);
    },
  };
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
  return `version=${st.version ?? ''} voters=${JSON.stringify(st.voters ?? [])} commits=${st.commits ?? ''} phase=${st.phase ?? ''} message=${st.message ?? ''}`;
}

/** Waits until the QueenCluster's status satisfies `ok`; the error says the last status seen. */
export async function waitForCluster(s: Scenario, what: string, ok: (qc: QueenCluster) => boolean, timeoutMs: number, name = 'queen'): Promise<QueenCluster> {
  let last: QueenCluster | null = null;
  return waitFor(
    what,
    async () => {
      last = await getCluster(s, name);
      return ok(last) ? last : undefined;
    },
    timeoutMs,
    () => (last ? row(last) : 'no QueenCluster'),
  );
}

/** The Events of the QueenCluster in the order they happened, as `kubectl describe` lists them. */
export async function clusterEvents(s: Scenario, name = 'queen'): Promise<CoreV1Event[]> {
  const list = await s.core.listNamespacedEvent({ namespace: s.ns, fieldSelector: `involvedObject.kind=QueenCluster,involvedObject.name=${name}` });
  return list.items.sort((a, b) => time(a) - time(b));
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

/** Starts an operator and forms a cluster; returns once it is Ready and commits. */
export async function formed(s: Scenario, spec: QueenClusterSpec, name = 'queen'): Promise<QueenCluster> {
  if (s.operators.length === 0) s.startOperator();
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
  /** (leader, term) pairs seen in status, in order. */
  leaders: { leader: number | null; term: number | null }[];
  stop(): Promise<void>;
}

/** Samples the QueenCluster and its pods every `everyMs` until stopped. */
export function monitor(s: Scenario, everyMs = 200, name = 'queen'): Monitor {
  const m: Monitor = { messages: [], phases: [], timeline: [], uids: new Map(), maxNotReady: 0, leaders: [], stop: async () => undefined };
  let running = true;
  let lastLine = '';
  const began = Date.now();
  const loop = (async () => {
    while (running) {
      try {
        const [qc, list] = await Promise.all([getCluster(s, name), pods(s, name)]);
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
        for (const v of voters) {
          const p = list.find((x) => x.metadata?.name === v);
          const ready = !!p && !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
          if (!ready) notReady++;
        }
        m.maxNotReady = Math.max(m.maxNotReady, notReady);
        for (const p of list) {
          const seen = m.uids.get(p.metadata!.name!) ?? [];
          if (seen.at(-1) !== p.metadata!.uid) seen.push(p.metadata!.uid!);
          m.uids.set(p.metadata!.name!, seen);
        }
      } catch {
        // a sample lost; the next one counts
      }
      await sleep(everyMs);
    }
  })();
  m.stop = async () => {
    running = false;
    await loop;
  };
  return m;
}
