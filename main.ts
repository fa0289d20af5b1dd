// The operator process: the watcher and the Temporal worker (both by default, or either alone).
// It starts things and stops them: the flags are read in options.ts, the connections are made
// (patiently) in connect.ts, the health endpoints and their checks live in health.ts, the Temporal
// runtime and worker in worker.ts, the giving back of the memory a burst took in memory.ts. On
// SIGTERM it stops taking work, lets running steps finish for a grace, and exits. `npm start`
// adds a local Temporal and, with no Kubernetes cluster configured, the local sandbox
// (test/testbed/sandbox.ts), beside it.
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import type { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { loadKubeConfig, makeKube } from './activities/kube.ts';
import { useResolver } from './activities/broker.ts';
import { setOperatorNamespace } from './activities/resources.ts';
import { ClusterCache } from './activities/cluster-cache.ts';
import type { ObserverRounds } from './activities/observer.ts';
import { apiServerOf, awaitKubernetes, backlogOf, connectTemporal, kubeConfigured, searchAttributesState, Stopped } from './connect.ts';
import { checksRoute, healthChecks, serve, type Parts } from './health.ts';
import { operatorLogger } from './log.ts';
import { trimMemoryAfterBursts } from './memory.ts';
import { countApiServerRequests, exposition, registerClusterGauges, registerGauge, registerObservedClusters, registerTaskQueueBacklog } from './metrics.ts';
import { OptionsError, parseOptions, type Options } from './options.ts';
import { OBSERVER_CHECK_BESIDE_WORKER_MS, Watcher } from './watcher/watcher.ts';
import { createWorker, freeLoopbackPort, installTemporalRuntime } from './worker.ts';

export async function main(argv: string[]): Promise<number> {
  let opts: Options;
  try {
    const parsed = parseOptions(argv, process.env);
    if ('help' in parsed) {
      process.stdout.write(parsed.help);
      return 0;
    }
    opts = parsed;
  } catch (err) {
    if (err instanceof OptionsError) {
      process.stderr.write(`queen-operator: ${err.message}\n(queen-operator --help lists the flags)\n`);
      return 2;
    }
    throw err;
  }
  const log = operatorLogger(opts.logLevel, opts.logFormat);
  const sdkMetricsPort = opts.metricsPort !== null ? await freeLoopbackPort() : null;
  installTemporalRuntime(log, sdkMetricsPort);
  if (opts.resolver) useResolver(opts.resolver);
  setOperatorNamespace(opts.operatorNamespace);
  const memoryTrim = trimMemoryAfterBursts(log);

  if (!kubeConfigured(opts.kubeconfig)) {
    log.error(
      opts.kubeconfig
        ? `the kubeconfig ${opts.kubeconfig} does not exist`
        : 'no Kubernetes cluster is configured: no KUBECONFIG, no ~/.kube/config, not in a pod (npm start starts a local sandbox for trying the operator)',
    );
    return 2;
  }

  const parts: Parts = { kubernetes: false, temporal: false, worker: null, watches: null, stopping: false };
  const checks = healthChecks(opts, parts);
  registerGauge('queen_operator_ready', 'Whether this replica is ready (its /readyz checks pass: it reaches the API server and Temporal, its watches synced, its worker polls): 1 or 0.', () =>
    checks.ready().every((c) => c.ok) ? 1 : 0,
  );
  if (opts.healthPort !== null) {
    await serve('the health endpoints (--health-port)', opts.healthPort, opts.bindAddress, {
      '/healthz': checksRoute(checks.live),
      '/readyz': checksRoute(checks.ready),
    });
    log.info({ port: opts.healthPort, address: opts.bindAddress ?? '*' }, 'serving /healthz and /readyz');
  }

  if (opts.metricsPort !== null) {
    const sdkUrl = sdkMetricsPort ? `http://127.0.0.1:${sdkMetricsPort}/metrics` : null;
    await serve('the metrics endpoint (--metrics-port)', opts.metricsPort, opts.bindAddress, {
      '/metrics': async (_req, res) => {
        const text = await exposition(sdkUrl);
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(text);
      },
    });
    log.info({ port: opts.metricsPort, address: opts.bindAddress ?? '*' }, 'serving /metrics');
  }

  // SIGTERM: stop taking work, let running steps finish (up to the grace), close, exit.
  const stop = new AbortController();
  let connection: NativeConnection | null = null;
  let workerDone: Promise<void> = Promise.resolve();
  let watcher: Watcher | null = null;
  let rounds: ObserverRounds | null = null;
  const stopped = new Promise<number>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      if (parts.stopping) return;
      parts.stopping = true;
      log.info({ signal, graceMs: opts.shutdownGraceMs }, `${signal}: taking no new work; running steps have ${Math.round(opts.shutdownGraceMs / 1000)}s to finish`);
      stop.abort();
      memoryTrim?.stop();
      void (async () => {
        await watcher?.stop().catch((e) => log.warn({ err: String(e) }, 'stopping the watcher failed'));
        if (parts.worker && parts.worker.getState() === 'RUNNING') parts.worker.shutdown();
        // The observers' rounds hand their state back (the next round runs on another replica).
        await rounds?.handOver().catch(() => undefined);
        await workerDone.catch(() => undefined);
        await parts.watches?.stop().catch(() => undefined);
        await connection?.close().catch(() => undefined);
        log.info('stopped');
        resolve(0);
      })();
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  });

  const started = (async (): Promise<number | null> => {
    const kc = loadKubeConfig(opts.kubeconfig);
    const kube = makeKube(kc);
    countApiServerRequests(apiServerOf(kc));
    log.info({ server: apiServerOf(kc) }, 'reaching the Kubernetes API server');
    await awaitKubernetes(kube, log, stop.signal);
    parts.kubernetes = true;
    connection = await connectTemporal(opts.temporal, log, stop.signal);
    parts.temporal = true;
    log.info({ temporal: opts.temporal.address, namespace: opts.temporal.namespace }, 'connected to Temporal');
    registerTaskQueueBacklog(backlogOf(connection, opts.temporal.namespace, opts.temporal.taskQueue));

    // One set of watches for the watcher's decisions and the observers' looks at resting clusters.
    const cache = new ClusterCache(kc, kube, opts.namespaces, log);
    parts.watches = cache;
    registerClusterGauges(cache);
    if (opts.run.has('worker')) {
      const { worker, rounds: taken } = await createWorker({
        connection,
        namespace: opts.temporal.namespace,
        taskQueue: opts.temporal.taskQueue,
        kube,
        settings: opts.settings,
        log,
        workflowBundlePath: opts.workflowBundle,
        shutdownGraceMs: opts.shutdownGraceMs,
        maxConcurrentSteps: opts.maxConcurrentSteps,
        stopping: stop.signal,
        cache,
      });
      if (stop.signal.aborted) return null;
      parts.worker = worker;
      rounds = taken;
      registerObservedClusters(() => taken.observed());
      workerDone = worker.run();
      // A worker that fails by itself (not on SIGTERM) takes the process down: the pod restarts.
      workerDone.catch((err) => {
        if (parts.stopping) return;
        log.fatal({ err: String(err) }, 'the worker failed');
        process.exit(1);
      });
      log.info({ taskQueue: opts.temporal.taskQueue }, 'worker running');
    }
    if (opts.run.has('watcher')) {
      const temporal = new Client({ connection, namespace: opts.temporal.namespace });
      const searchAttributes = await searchAttributesState(connection, opts.temporal.namespace, log, stop.signal);
      // Beside a worker, its rounds tell the watcher of an observer run gone: checked more rarely.
      const observerCheckMs = rounds ? OBSERVER_CHECK_BESIDE_WORKER_MS : undefined;
      watcher = new Watcher({ cache, kube, temporal, taskQueue: opts.temporal.taskQueue, log, searchAttributes, observerCheckMs, eagerStart: rounds !== null });
      const deciding = watcher;
      if (rounds) rounds.onLost = (ns, name) => deciding.observerLost(ns, name);
      await watcher.start();
      log.info({ namespaces: opts.namespaces.length ? opts.namespaces : 'all' }, 'watcher running');
    } else {
      await cache.start();
    }
    return null;
  })().catch((err) => {
    if (err instanceof Stopped) return null;
    log.fatal({ err: err instanceof Error ? err.message : String(err) }, 'the operator could not start');
    return 1;
  });

  const failedToStart = await Promise.race([started, stopped]);
  if (typeof failedToStart === 'number' && failedToStart !== 0) return failedToStart;
  return stopped;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      console.error(`queen-operator: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    },
  );
}
