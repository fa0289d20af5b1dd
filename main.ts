// The operator process: the watcher and the Temporal worker (both by default, or either alone).
// Without a Temporal address it starts a local Temporal dev server; without a reachable
// Kubernetes cluster it starts the local sandbox (the test bed) and says how to use it.
import { createServer } from 'node:http';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { Runtime, makeTelemetryFilterString, type LogLevel } from '@temporalio/worker';
import { pino, type Logger } from 'pino';
import { parse as parseYaml } from 'yaml';
import { applyObject, loadKubeConfig, makeKube, statusCode, type Kube } from './activities/kube.ts';
import { useResolver } from './activities/broker.ts';
import { DEFAULT_SETTINGS, type Settings } from './activities/settings.ts';
import { GROUP, VERSION } from './crd/schema.ts';
import { Watcher } from './watcher/watcher.ts';
import { createWorker } from './worker.ts';

const HELP = `Usage: npm start -- [options]

Runs the Queen operator: the watcher (decides which operation a QueenCluster needs and starts it
as a Temporal workflow) and the worker (runs the workflows and their steps).

  --run worker,watcher        what this process runs (default: both)
  --temporal-address ADDR     Temporal frontend host:port (TEMPORAL_ADDRESS); without it a local
                              Temporal dev server is started, its state kept in --state-dir
  --temporal-namespace NS     Temporal namespace (TEMPORAL_NAMESPACE, default: default)
  --task-queue NAME           (QUEEN_TASK_QUEUE, default: queen-operator)
  --kubeconfig FILE           (KUBECONFIG, else ~/.kube/config or the in-cluster account); without a
                              reachable cluster the local sandbox is started
  --sandbox                   start the local sandbox even when a cluster is configured
  --namespace NS[,NS]         namespaces to watch (QUEEN_NAMESPACES, default: all)
  --broker-access MODE        dns (a pod's name through the headless Service, in a cluster) or
                              pod-ip (its pod IP, outside the cluster) (QUEEN_BROKER_ACCESS)
  --resolver HOST:PORT        resolve the pods' names through this DNS server (QUEEN_RESOLVER)
  --health-port PORT          serve /healthz and /readyz on this port
  --state-dir DIR             local state: Temporal's database, the sandbox (QUEEN_STATE_DIR,
                              default: .cache/operator)
  --workflow-bundle FILE      a prebuilt workflow bundle (QUEEN_WORKFLOW_BUNDLE)
  --poll-interval D           how often a waiting step looks again (default 2s)
  --observe-interval D        how often the observer looks at a cluster (default 5s)
  --probe-interval D          how often the resting write probe runs (default 1m)
  --stall-after D             a voter behind that has not moved for D is stalled (default 10s)
  --settle-timeout D          how long an upgrade waits for the cluster after its last restart (default 10m)
  --log-level LEVEL           (LOG_LEVEL, default: info)
  -h, --help

Durations: 500ms, 2s, 1m, 1h.`;

export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text.trim());
  if (!m) throw new Error(`not a duration: ${text} (use 500ms, 2s, 1m, 1h)`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
  return Math.round(Number(m[1]) * unit);
}

interface Options {
  run: Set<'worker' | 'watcher'>;
  temporalAddress: string | undefined;
  temporalNamespace: string;
  taskQueue: string;
  kubeconfig: string | undefined;
  sandbox: boolean;
  namespaces: string[];
  healthPort: number | undefined;
  stateDir: string;
  workflowBundle: string | undefined;
  settings: Settings;
  logLevel: string;
  brokerAccessGiven: boolean;
  resolver: string | undefined;
}

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv): Options | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      run: { type: 'string' },
      'temporal-address': { type: 'string' },
      'temporal-namespace': { type: 'string' },
      'task-queue': { type: 'string' },
      kubeconfig: { type: 'string' },
      sandbox: { type: 'boolean' },
      namespace: { type: 'string', multiple: true },
      'broker-access': { type: 'string' },
      resolver: { type: 'string' },
      'health-port': { type: 'string' },
      'state-dir': { type: 'string' },
      'workflow-bundle': { type: 'string' },
      'poll-interval': { type: 'string' },
      'observe-interval': { type: 'string' },
      'probe-interval': { type: 'string' },
      'stall-after': { type: 'string' },
      'settle-timeout': { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return null;
  const run = new Set((values.run ?? 'worker,watcher').split(',').map((s) => s.trim()));
  for (const r of run) if (r !== 'worker' && r !== 'watcher') throw new Error(`--run takes worker, watcher or both, not ${r}`);
  const access = values['broker-access'] ?? env.QUEEN_BROKER_ACCESS;
  if (access !== undefined && access !== 'dns' && access !== 'pod-ip') throw new Error(`--broker-access takes dns or pod-ip, not ${access}`);
  const d = (flag: string | undefined, dflt: number) => (flag ? parseDuration(flag) : dflt);
  const namespaces = (values.namespace ?? (env.QUEEN_NAMESPACES ? [env.QUEEN_NAMESPACES] : []))
    .flatMap((n) => n.split(','))
    .map((n) => n.trim())
    .filter(Boolean);
  return {
    run: run as Set<'worker' | 'watcher'>,
    temporalAddress: values['temporal-address'] ?? env.TEMPORAL_ADDRESS,
    temporalNamespace: values['temporal-namespace'] ?? env.TEMPORAL_NAMESPACE ?? 'default',
    taskQueue: values['task-queue'] ?? env.QUEEN_TASK_QUEUE ?? 'queen-operator',
    kubeconfig: values.kubeconfig ?? env.KUBECONFIG,
    sandbox: values.sandbox ?? false,
    namespaces,
    healthPort: values['health-port'] ? Number(values['health-port']) : undefined,
    stateDir: resolve(values['state-dir'] ?? env.QUEEN_STATE_DIR ?? '.cache/operator'),
    workflowBundle: values['workflow-bundle'] ?? env.QUEEN_WORKFLOW_BUNDLE,
    logLevel: values['log-level'] ?? env.LOG_LEVEL ?? 'info',
    brokerAccessGiven: access !== undefined,
    resolver: values.resolver ?? env.QUEEN_RESOLVER,
    settings: {
      ...DEFAULT_SETTINGS,
      brokerAccess: (access as Settings['brokerAccess'] | undefined) ?? DEFAULT_SETTINGS.brokerAccess,
      pollMs: d(values['poll-interval'], DEFAULT_SETTINGS.pollMs),
      observeIntervalMs: d(values['observe-interval'], DEFAULT_SETTINGS.observeIntervalMs),
      probeIntervalMs: d(values['probe-interval'], DEFAULT_SETTINGS.probeIntervalMs),
      stallAfterMs: d(values['stall-after'], DEFAULT_SETTINGS.stallAfterMs),
      settleTimeoutMs: d(values['settle-timeout'], DEFAULT_SETTINGS.settleTimeoutMs),
    },
  };
}

/** A Kubernetes cluster is configured when a kubeconfig exists or the process runs in a pod. */
function kubeConfigured(file: string | undefined): boolean {
  if (file) return file.split(':').some((f) => existsSync(f));
  return existsSync(join(homedir(), '.kube', 'config')) || !!process.env.KUBERNETES_SERVICE_HOST;
}

async function reachable(kube: Kube): Promise<boolean> {
  try {
    await kube.core.getAPIResources();
    return true;
  } catch (err) {
    return statusCode(err) !== null;
  }
}

async function crdInstalled(kube: Kube): Promise<boolean> {
  try {
    await kube.objects.read({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: `queenclusters.${GROUP}` } });
    return true;
  } catch (err) {
    if (statusCode(err) === 404) return false;
    if (statusCode(err) === 403) return true; // cannot read CRDs under least privilege; the watch will tell
    throw err;
  }
}

export const CRD_FILE = fileURLToPath(new URL('./deploy/crd.yaml', import.meta.url));

function installTemporalLogging(log: Logger) {
  const forward = (level: LogLevel) => (message: string, meta?: Record<string, unknown>) => {
    const fn = level === 'ERROR' ? log.error.bind(log) : level === 'WARN' ? log.warn.bind(log) : log.debug.bind(log);
    fn({ component: 'temporal', ...(meta ?? {}) }, message);
  };
  Runtime.install({
    logger: {
      log: (level, message, meta) => forward(level)(message, meta),
      trace: forward('TRACE'),
      debug: forward('DEBUG'),
      info: forward('INFO'),
      warn: forward('WARN'),
      error: forward('ERROR'),
    },
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }), forward: {} } },
  });
}

export async function main(argv: string[]): Promise<void> {
  const opts = parseOptions(argv, process.env);
  if (!opts) {
    console.log(HELP);
    return;
  }
  const log = pino({ level: opts.logLevel, base: { component: 'queen-operator' } });
  if (opts.resolver) useResolver(opts.resolver);
  installTemporalLogging(log);
  mkdirSync(opts.stateDir, { recursive: true });
  const cleanups: (() => Promise<void>)[] = [];
  const shutdown = async (code: number) => {
    for (const c of cleanups.reverse()) await c().catch((e) => log.warn({ err: String(e) }, 'shutdown step failed'));
    process.exit(code);
  };
  process.once('SIGINT', () => void shutdown(0));
  process.once('SIGTERM', () => void shutdown(0));

  let kubeconfig = opts.kubeconfig;
  let temporalAddress = opts.temporalAddress;
  let sandbox = opts.sandbox || !kubeConfigured(kubeconfig);
  if (!sandbox) {
    const kube = makeKube(loadKubeConfig(kubeconfig));
    if (!(await reachable(kube))) {
      log.warn('the configured Kubernetes cluster does not answer: starting the local sandbox instead');
      sandbox = true;
    }
  }
  if (sandbox) {
    const { startTestbed } = await import('./test/testbed/testbed.ts');
    log.info('starting the local sandbox: a Kubernetes control plane, simulated nodes and Queen brokers, a Temporal server');
    const tb = await startTestbed({ dir: join(opts.stateDir, 'sandbox'), timeFactor: 1 });
    cleanups.push(() => tb.stop());
    kubeconfig = tb.kubeconfigPath;
    if (!temporalAddress) temporalAddress = tb.temporal.address;
    if (!opts.brokerAccessGiven) opts.settings.brokerAccess = 'pod-ip';
    const kube = makeKube(loadKubeConfig(kubeconfig));
    await applyObject(kube, parseYaml(readFileSync(CRD_FILE, 'utf8')));
    console.log(
      [
        '',
        'The sandbox runs. In another terminal:',
        `  export KUBECONFIG=${kubeconfig}`,
        `  kubectl apply -f ${fileURLToPath(new URL('./deploy/examples/queen.yaml', import.meta.url))}`,
        '  kubectl -n queen get queencluster -w',
        `Temporal Web UI: ${tb.temporal.uiUrl}`,
        `(a kubectl of the same version: ${tb.info.tools.kubectl})`,
        '',
      ].join('\n'),
    );
  }
  if (!temporalAddress) {
    const { startTemporal } = await import('./test/testbed/temporal.ts');
    const t = await startTemporal({ dir: join(opts.stateDir, 'temporal'), persistent: true });
    cleanups.push(() => t.stop());
    temporalAddress = t.address;
    console.log(`Temporal runs locally at ${t.address}; its Web UI: ${t.uiUrl}`);
  }

  const kc = loadKubeConfig(kubeconfig);
  const kube = makeKube(kc);
  if (!(await crdInstalled(kube))) {
    log.error(`the QueenCluster CRD (queenclusters.${GROUP}/${VERSION}) is not installed: kubectl apply -f ${CRD_FILE}`);
    await shutdown(2);
  }

  let ready = false;
  if (opts.healthPort !== undefined) {
    const server = createServer((req, res) => {
      const ok = req.url === '/healthz' || (req.url === '/readyz' && ready);
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok' : 'not ready');
    });
    server.listen(opts.healthPort);
    cleanups.push(() => new Promise((r) => server.close(() => r())));
  }

  const running: Promise<unknown>[] = [];
  if (opts.run.has('worker')) {
    const worker = await createWorker({
      address: temporalAddress!,
      namespace: opts.temporalNamespace,
      taskQueue: opts.taskQueue,
      kube,
      settings: opts.settings,
      log,
      workflowBundlePath: opts.workflowBundle,
    });
    cleanups.push(async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
    });
    running.push(worker.run());
    log.info({ taskQueue: opts.taskQueue, temporal: temporalAddress }, 'worker running');
  }
  if (opts.run.has('watcher')) {
    const connection = await Connection.connect({ address: temporalAddress! });
    const temporal = new Client({ connection, namespace: opts.temporalNamespace });
    const watcher = new Watcher({ kc, kube, temporal, taskQueue: opts.taskQueue, namespaces: opts.namespaces, log });
    await watcher.start();
    cleanups.push(async () => {
      await watcher.stop();
      await connection.close();
    });
    log.info({ namespaces: opts.namespaces.length ? opts.namespaces : 'all' }, 'watcher running');
  }
  ready = true;
  await Promise.all(running);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(`queen-operator: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
