// The Temporal worker: the workflows (bundled once, or read from a prebuilt bundle) and the
// activities bound to the Kubernetes client and the settings.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer as createNetServer } from 'node:net';
import { Runtime, Worker, bundleWorkflowCode, makeTelemetryFilterString, type ActivityInterceptorsFactory, type LogLevel as TemporalLogLevel, type NativeConnection, type WorkerOptions } from '@temporalio/worker';
import { CancelledFailure, CompleteAsyncError } from '@temporalio/common';
import { AsyncCompletionClient } from '@temporalio/client';
import type { Logger } from 'pino';
import { gatesHeld } from './activities/waits.ts';
import type { ClusterCache } from './activities/cluster-cache.ts';
import { createActivities } from './activities/index.ts';
import { ObserverRounds } from './activities/observer.ts';
import type { Kube } from './activities/kube.ts';
import type { Settings } from './activities/settings.ts';
import { stepDuration } from './metrics.ts';
import { formatIdentity, PROCESS } from './identity.ts';

/**
 * Each attempt of a step, timed into queen_step_duration_seconds by its activity type and outcome;
 * a wait's result says which named gates held it and how long each (`held`), so the Web UI's
 * history answers "why did this take so long" (a result that is a value of its own is left as it is).
 */
const timeSteps: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    async execute(input, next) {
      const began = performance.now();
      let outcome = 'completed';
      try {
        const result = await next(input);
        const held = gatesHeld(ctx);
        if (!held) return result;
        if (result === undefined) return { held };
        if (result !== null && typeof result === 'object' && !Array.isArray(result)) return { ...(result as object), held };
        return result;
      } catch (err) {
        // An observer round goes on outside the activity (activities/observer.ts): not a step's end.
        outcome = err instanceof CompleteAsyncError ? '' : err instanceof CancelledFailure ? 'cancelled' : 'failed';
        throw err;
      } finally {
        if (outcome) stepDuration.observe({ step: ctx.info.activityType, outcome }, (performance.now() - began) / 1000);
      }
    },
  },
});

/**
 * Crash points, for the chaos tests only (off unless QUEEN_CRASH_AT is set): `<workflow>:<activity
 * id>[,...]`, e.g. `rollingUpgrade:7`. The first attempt of that activity of a run of that workflow
 * kills the process (SIGKILL) right after its side effects are done and before Temporal hears it
 * completed: the crash a step must survive without doing anything twice. It fires once per pod:
 * a marker file in QUEEN_CRASH_MARKER_DIR (an emptyDir, which outlives the container) says it has.
 */
export function crashPoints(env: NodeJS.ProcessEnv = process.env): ActivityInterceptorsFactory | null {
  const spec = env.QUEEN_CRASH_AT?.trim();
  if (!spec) return null;
  const points = spec.split(',').map((p) => {
    const m = /^(\w+):(\d+)$/.exec(p.trim());
    if (!m) throw new Error(`QUEEN_CRASH_AT: "${p}" is not <workflow>:<activity id>`);
    return { workflow: m[1]!, activityId: m[2]! };
  });
  const markers = env.QUEEN_CRASH_MARKER_DIR ?? '/tmp';
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const result = await next(input);
        const { workflowType, activityId, attempt } = ctx.info;
        const point = points.find((p) => p.workflow === workflowType && p.activityId === activityId);
        const marker = join(markers, `queen-crashed-${workflowType}-${activityId}`);
        if (point && attempt === 1 && !existsSync(marker)) {
          writeFileSync(marker, new Date().toISOString());
          process.stderr.write(`queen-operator: crash point ${workflowType}:${activityId} (${ctx.info.activityType}) reached: SIGKILL\n`);
          process.kill(process.pid, 'SIGKILL');
          await new Promise(() => undefined);
        }
        return result;
      },
    },
  });
}

export const WORKFLOWS_PATH = fileURLToPath(new URL('./workflows/index.ts', import.meta.url));

/** Bundles the workflow code (webpack + swc), for a worker or for a file several workers share. */
export async function bundleWorkflows(): Promise<string> {
  const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietBundlerLogger });
  return code;
}

const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: (message: string, meta?: Record<string, unknown>) => console.error(message, meta ?? ''),
};

export interface WorkerConfig {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  kube: Kube;
  settings: Settings;
  log: Logger;
  /** A bundle written by bundleWorkflows(); without it the worker bundles at start. */
  workflowBundlePath?: string;
  /** On shutdown, how long running activities may take to finish before they are cancelled. */
  shutdownGraceMs?: number;
  /** How many activities (steps) run at once (--max-concurrent-steps). */
  maxConcurrentSteps?: number;
  /** Aborted when the process stops: waiting steps then hand over to another replica at once. */
  stopping?: AbortSignal;
  /** The process's watches: the observer reads resting clusters from them. */
  cache?: ClusterCache;
}

export interface OperatorWorker {
  worker: Worker;
  /** The observer rounds this worker took: on SIGTERM, handed back before the connection closes. */
  rounds: ObserverRounds;
}

export async function createWorker(cfg: WorkerConfig): Promise<OperatorWorker> {
  const crash = crashPoints();
  if (crash) cfg.log.warn({ crashAt: process.env.QUEEN_CRASH_AT }, 'crash points are set (QUEEN_CRASH_AT): this operator kills itself at them, for the chaos tests');
  const deps = {
    kube: cfg.kube,
    settings: cfg.settings,
    log: cfg.log,
    stopping: cfg.stopping,
    cache: cfg.cache,
    completions: new AsyncCompletionClient({ connection: cfg.connection, namespace: cfg.namespace }),
  };
  const rounds = new ObserverRounds(deps);
  const options: WorkerOptions = {
    connection: cfg.connection,
    namespace: cfg.namespace,
    taskQueue: cfg.taskQueue,
    // The attempts it takes are recorded under it: the watcher of a restarted pod tells them apart
    // from its own and retries at once those its earlier process left (identity.ts).
    identity: formatIdentity(PROCESS),
    activities: createActivities(deps, rounds),
    ...(cfg.workflowBundlePath ? { workflowBundle: { codePath: cfg.workflowBundlePath } } : { workflowBundle: { code: await bundleWorkflows() } }),
    // A wait for the machine is a heartbeating activity that holds a slot while it waits; a wait for
    // a person holds none (it parks in its workflow), nor do the observers' rounds.
    maxConcurrentActivityTaskExecutions: cfg.maxConcurrentSteps ?? 200,
    // A cached workflow costs about a megabyte; a resting cluster's observer wakes once a round (ten
    // minutes) and replays its short history when it is not cached. The cache keeps what runs now.
    maxCachedWorkflows: 100,
    // Workflow task pollers as many as the server says a backlog needs: with a fixed ten, two of
    // them poll for the tasks of runs not in any worker's cache (new runs when the watcher runs
    // elsewhere, runs evicted), and 50 upgrades started at once waited up to 6 s for them.
    workflowTaskPollerBehavior: { type: 'autoscaling', minimum: 2, initial: 5, maximum: 40 },
    shutdownGraceTime: cfg.shutdownGraceMs ?? 5000,
    interceptors: { activity: [timeSteps, ...(crash ? [crash] : [])] },
  };
  return { worker: await Worker.create(options), rounds };
}

/** A free port on the loopback interface (for the Temporal SDK's private metrics exporter). */
export async function freeLoopbackPort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The Temporal SDK's runtime: its log into ours, and its metrics (if any) on a private loopback port. */
export function installTemporalRuntime(log: Logger, metricsPort: number | null) {
  const forward = (level: TemporalLogLevel) => (message: string, meta?: Record<string, unknown>) => {
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
    telemetryOptions: {
      logging: { filter: makeTelemetryFilterString({ core: 'WARN' }), forward: {} },
      ...(metricsPort ? { metrics: { prometheus: { bindAddress: `127.0.0.1:${metricsPort}`, countersTotalSuffix: true, useSecondsForDurations: true } } } : {}),
    },
  });
}
