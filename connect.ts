// The operator's two connections, made patiently: an API server or a Temporal frontend that does
// not answer (yet) is asked again with a growing pause, and the log says which address failed and
// why, in words rather than a transport's error dump. The process is not ready until both answer.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import type { Logger } from 'pino';
import { describeKubeError, networkWords, statusCode, type Kube } from './activities/kube.ts';
import { GROUP } from './crd/schema.ts';
import type { TemporalOptions } from './options.ts';
import { SEARCH_ATTRIBUTES } from './workflows/search-attributes.ts';

/** A Kubernetes cluster is configured: a kubeconfig file exists, or the process runs in a pod. */
export function kubeConfigured(file: string | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  if (file) return file.split(':').some((f) => existsSync(f));
  return !!env.KUBERNETES_SERVICE_HOST || existsSync(join(homedir(), '.kube', 'config'));
}

/** Pauses between attempts: 1 s, doubling, at most 30 s. */
export function backoff(attempt: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.min(attempt, 5));
}

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });

export class Stopped extends Error {
  override name = 'Stopped';
}

/**
 * Calls `attempt` until it succeeds; each failure is logged once with what failed (`describe`)
 * and when the next try is. Throws Stopped when `signal` aborts first.
 */
export async function patiently<T>(what: string, attempt: () => Promise<T>, describe: (err: unknown) => string, log: Logger, signal: AbortSignal): Promise<T> {
  for (let n = 0; ; n++) {
    if (signal.aborted) throw new Stopped(`stopped before ${what}`);
    try {
      const value = await attempt();
      if (n > 0) log.info(`${what}: done after ${n + 1} attempts`);
      return value;
    } catch (err) {
      if (signal.aborted) throw new Stopped(`stopped before ${what}`);
      const wait = backoff(n);
      log.warn({ attempt: n + 1, retryInMs: wait }, `${what} failed: ${describe(err)}; trying again in ${Math.round(wait / 1000)}s`);
      await pause(wait, signal);
    }
  }
}

// ---- Kubernetes ---------------------------------------------------------------------------------

/** Waits until the API server answers, then until the QueenCluster definition is installed. */
export async function awaitKubernetes(kube: Kube, log: Logger, signal: AbortSignal): Promise<void> {
  const server = kube.kc.getCurrentCluster()?.server ?? 'the API server';
  await patiently(`reaching the Kubernetes API server at ${server}`, () => kube.core.getAPIResources(), describeKubeError, log, signal);
  await patiently(
    `finding the QueenCluster definition (queenclusters.${GROUP})`,
    async () => {
      try {
        await kube.objects.read({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: `queenclusters.${GROUP}` } });
      } catch (err) {
        // Least privilege: an operator that may not read definitions finds out from its watch.
        if (statusCode(err) === 403) return;
        throw err;
      }
    },
    (err) => (statusCode(err) === 404 ? 'it is not installed: kubectl apply -f deploy/crd.yaml' : describeKubeError(err)),
    log,
    signal,
  );
}

export function apiServerOf(kc: KubeConfig): string {
  return kc.getCurrentCluster()?.server ?? 'the API server';
}

// ---- Temporal -----------------------------------------------------------------------------------

/** The connection options of the flags: address, TLS (CA, client certificate), API key. */
export function temporalConnectionOptions(t: TemporalOptions): NativeConnectionOptions {
  const read = (f: string | undefined) => (f ? readFileSync(f) : undefined);
  const ca = read(t.tlsCa);
  const crt = read(t.tlsCert);
  const key = read(t.tlsKey);
  return {
    address: t.address,
    ...(t.tls
      ? {
          tls: {
            ...(ca ? { serverRootCACertificate: ca } : {}),
            ...(crt && key ? { clientCertPair: { crt, key } } : {}),
            ...(t.tlsServerName ? { serverNameOverride: t.tlsServerName } : {}),
          },
        }
      : {}),
    ...(t.apiKey ? { apiKey: t.apiKey } : {}),
  };
}

/** What went wrong reaching the Temporal frontend, in words (the transport's error is a dump). */
export function describeTemporalError(err: unknown, t: Pick<TemporalOptions, 'tls' | 'tlsCa' | 'tlsCert' | 'apiKey' | 'namespace'>): string {
  // The transport's words are in the message, its details, or further down the causes.
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e != null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    parts.push(e instanceof Error ? `${e.message} ${String((e as { details?: unknown }).details ?? '')}` : String(e));
  }
  const text = parts.join(' ');
  if (/UnknownIssuer|unknown ca|self[- ]signed|certificate verify failed/i.test(text)) {
    return t.tlsCa
      ? `its TLS certificate is not signed by the CA of --temporal-tls-ca (${t.tlsCa})`
      : "its TLS certificate is not signed by a CA this machine trusts: give the frontend's CA with --temporal-tls-ca";
  }
  if (/NotValidForName|certificate is not valid for|hostname mismatch/i.test(text)) return 'its TLS certificate does not name this host: set --temporal-tls-server-name to a name it carries';
  if (/CertificateRequired|certificate required|bad certificate|alert.*(Certificate|handshake)/i.test(text)) {
    return 'it refused the TLS handshake: it asks for a client certificate (--temporal-tls-cert, --temporal-tls-key) signed by a CA it trusts';
  }
  if (/InvalidContentType|corrupt message|wrong version number|record overflow/i.test(text)) {
    return t.tls ? 'it does not speak TLS there: turn --temporal-tls off, or use its TLS port' : 'the answer was not gRPC';
  }
  if (/frame with invalid size|h2 protocol error|http2 error|connection reset|broken pipe|BrokenPipe|ConnectionReset|ConnectionAborted|UnexpectedEof|tls handshake eof/i.test(text)) {
    if (!t.tls) return 'the connection broke at once: if the frontend asks for TLS, give --temporal-tls (and --temporal-tls-ca)';
    if (!t.tlsCert) return 'the connection broke right after the TLS handshake: a frontend that asks for a client certificate does this (--temporal-tls-cert, --temporal-tls-key)';
    return 'the connection broke right after the TLS handshake: the frontend may not accept this client certificate';
  }
  if (/Unauthenticated|unauthenticated|valid authentication credentials|\b401\b/.test(text)) {
    return t.apiKey ? 'it refused the API key' : 'it asks for credentials: give an API key (TEMPORAL_API_KEY) or a client certificate';
  }
  if (/PermissionDenied|permission denied/i.test(text)) return `these credentials may not use the namespace ${t.namespace}`;
  if (/NotFound.*[Nn]amespace|[Nn]amespace.*not found/.test(text)) {
    return `the Temporal namespace ${t.namespace} does not exist: temporal operator namespace create --namespace ${t.namespace}`;
  }
  return networkWords(err);
}

/** Connects to the Temporal frontend, waiting as long as it takes; checks that the namespace exists. */
export async function connectTemporal(t: TemporalOptions, log: Logger, signal: AbortSignal): Promise<NativeConnection> {
  return patiently(
    `connecting to the Temporal frontend at ${t.address}${t.tls ? ' with TLS' : ''}`,
    async () => {
      const connection = await NativeConnection.connect(temporalConnectionOptions(t));
      try {
        await connection.workflowService.describeNamespace({ namespace: t.namespace });
      } catch (err) {
        await connection.close().catch(() => undefined);
        throw err;
      }
      return connection;
    },
    (err) => describeTemporalError(err, t),
    log,
    signal,
  );
}

/** While the search attributes are missing, how often the operator looks for them again. */
export const SEARCH_ATTRIBUTE_RECHECK_MS = 30_000;

/** The operator's search attributes the namespace does not have yet. */
async function missingSearchAttributes(connection: NativeConnection, namespace: string) {
  const listed = await connection.operatorService.listSearchAttributes({ namespace });
  const have = new Set(Object.keys(listed.customAttributes ?? {}));
  return Object.values(SEARCH_ATTRIBUTES).filter((k) => !have.has(k.name));
}

/**
 * Registers the operator's search attributes in the Temporal namespace if they are missing.
 * Returns whether they are there: a server that does not let this account register them (Temporal
 * Cloud registers them through its console or tcld) is said once, and the workflows start without
 * them (the operations work; the Web UI then finds them by workflow id only).
 */
async function ensureSearchAttributes(connection: NativeConnection, namespace: string, log: Logger): Promise<boolean> {
  const wanted = Object.values(SEARCH_ATTRIBUTES);
  try {
    const missing = await missingSearchAttributes(connection, namespace);
    if (missing.length === 0) return true;
    const INDEXED_VALUE_TYPE_KEYWORD = 2;
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((k) => [k.name, INDEXED_VALUE_TYPE_KEYWORD])),
    });
    log.info({ searchAttributes: missing.map((k) => k.name) }, 'registered the search attributes of the operations in Temporal');
    return true;
  } catch (err) {
    const text = String((err as Error)?.message ?? err);
    // Another replica registered them at the same moment.
    if (/already exists/i.test(text)) return true;
    log.warn(
      { err: text.split('\n')[0] },
      `could not register the search attributes ${wanted.map((k) => k.name).join(', ')} (Keyword) in Temporal namespace ${namespace}: ` +
        `register them yourself (docs/temporal.md); until then the operations start without them, and the operator looks for them every ${SEARCH_ATTRIBUTE_RECHECK_MS / 1000}s`,
    );
    return false;
  }
}

/**
 * Whether the search attributes are registered now, for the watcher to ask at each start: checked
 * (and registered where it may) at once; while they are missing, looked for again every
 * `recheckMs`, so attributes someone adds later (in a console, with tcld or the CLI) are used from
 * the next start on, with no restart.
 */
export async function searchAttributesState(
  connection: NativeConnection,
  namespace: string,
  log: Logger,
  signal: AbortSignal,
  recheckMs = SEARCH_ATTRIBUTE_RECHECK_MS,
): Promise<() => boolean> {
  let registered = await ensureSearchAttributes(connection, namespace, log);
  if (!registered) {
    const timer = setInterval(() => {
      missingSearchAttributes(connection, namespace).then(
        (missing) => {
          if (missing.length > 0 || registered) return;
          registered = true;
          clearInterval(timer);
          log.info(`the search attributes are registered in Temporal namespace ${namespace} now: the operations start with them`);
        },
        () => undefined,
      );
    }, recheckMs);
    timer.unref();
    signal.addEventListener('abort', () => clearInterval(timer), { once: true });
  }
  return () => registered;
}

/**
 * Reads the task queue's backlog from Temporal (for queen_task_queue_backlog): the tasks of each
 * type no worker has taken up yet, as the server estimates them; null when it does not say.
 */
export function backlogOf(connection: NativeConnection, namespace: string, taskQueue: string) {
  const TASK_QUEUE_TYPE = { workflow: 1, activity: 2 } as const;
  return async (type: 'workflow' | 'activity'): Promise<number | null> => {
    const r = await connection.workflowService.describeTaskQueue({
      namespace,
      taskQueue: { name: taskQueue },
      taskQueueType: TASK_QUEUE_TYPE[type],
      reportStats: true,
    });
    const n = r.stats?.approximateBacklogCount;
    return n == null ? null : Number(n);
  };
}
