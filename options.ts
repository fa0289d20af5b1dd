// The operator's flags and environment variables: parsed and checked at start, so a bad value is
// refused at once with the flag named (commander does the parsing and the usage text). Every flag
// has an environment variable; a flag wins over its variable.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_SETTINGS, type Settings } from './activities/settings.ts';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export interface TemporalOptions {
  /** host:port of the Temporal frontend. */
  address: string;
  namespace: string;
  taskQueue: string;
  /** TLS: on when asked for, or when a CA, a client certificate or an API key is given. */
  tls: boolean;
  /** PEM file names, read at start. */
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsServerName?: string;
  /** The API key itself (from TEMPORAL_API_KEY or the file of --temporal-api-key-file). */
  apiKey?: string;
}

export interface Options {
  run: Set<'worker' | 'watcher'>;
  temporal: TemporalOptions;
  kubeconfig: string | undefined;
  /** Namespaces to watch; empty: all. */
  namespaces: string[];
  /** The namespace the operator runs in (its NetworkPolicies let it through); null: unknown. */
  operatorNamespace: string | null;
  /** A DNS server (host:port) for the pods' names, instead of the system's. */
  resolver: string | undefined;
  /** The address the health and metrics endpoints listen on; undefined: every interface. */
  bindAddress: string | undefined;
  /** null: not served. */
  healthPort: number | null;
  metricsPort: number | null;
  workflowBundle: string | undefined;
  /** On SIGTERM, how long running steps may take to finish before the process exits. */
  shutdownGraceMs: number;
  /** How many steps (activities) this replica runs at once: its worker slots. */
  maxConcurrentSteps: number;
  /** /healthz fails once the watches have been broken (or the worker stopped polling) this long. */
  unhealthyAfterMs: number;
  settings: Settings;
  logLevel: LogLevel;
  logFormat: LogFormat;
}

// ---- values -------------------------------------------------------------------------------------

const UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** A duration as Go and kubectl write them: 500ms, 2s, 1m, 1m30s, 1h. */
export function parseDuration(text: string): number {
  const t = text.trim();
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(t)) throw new InvalidArgumentError('not a duration: use a number and a unit, such as 500ms, 2s, 1m30s or 1h');
  let ms = 0;
  for (const m of t.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) ms += Number(m[1]) * UNITS[m[2] as keyof typeof UNITS];
  return Math.round(ms);
}

/** A duration from `min` to `max` (Go's form, e.g. '1s'); `why` says what the upper bound protects. */
const durationWithin = (min: string, max: string, why = 'longer waits are not what it is for') => (text: string) => {
  const ms = parseDuration(text);
  if (ms < parseDuration(min)) throw new InvalidArgumentError(`must be at least ${min}`);
  if (ms > parseDuration(max)) throw new InvalidArgumentError(`must be at most ${max}: ${why}`);
  return ms;
};

function nonEmpty(text: string): string {
  if (text.trim() === '') throw new InvalidArgumentError('must not be empty');
  return text.trim();
}

/** A TCP port; 0 turns the endpoint off. */
function port(text: string): number {
  if (!/^\d+$/.test(text.trim())) throw new InvalidArgumentError('a port is a number from 1 to 65535 (0 turns it off)');
  const n = Number(text);
  if (n > 65535) throw new InvalidArgumentError('a port is a number from 1 to 65535 (0 turns it off)');
  return n;
}

const countWithin = (min: number, max: number) => (text: string) => {
  const n = Number(text.trim());
  if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`not a whole number from ${min} to ${max}`);
  return n;
};

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function namespaceList(text: string, previous: string[] = []): string[] {
  const names = text.split(',').map((n) => n.trim()).filter(Boolean);
  if (names.length === 0) throw new InvalidArgumentError('takes namespace names separated by commas; leave it out to watch every namespace');
  for (const n of names) {
    if (!DNS_LABEL.test(n)) throw new InvalidArgumentError(`"${n}" is not a namespace name (lower-case letters, digits and '-', at most 63)`);
  }
  return [...previous, ...names];
}

function namespaceName(text: string): string {
  const n = text.trim();
  if (!DNS_LABEL.test(n)) throw new InvalidArgumentError(`"${n}" is not a namespace name (lower-case letters, digits and '-', at most 63)`);
  return n;
}

/** The namespace of the pod the operator runs in (its ServiceAccount's), or null outside a cluster. */
const POD_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';
function podNamespace(): string | null {
  try {
    const n = readFileSync(POD_NAMESPACE_FILE, 'utf8').trim();
    return DNS_LABEL.test(n) ? n : null;
  } catch {
    return null;
  }
}

function hostPort(text: string): string {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(text.trim());
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) throw new InvalidArgumentError('use host:port, such as temporal-frontend.temporal.svc:7233');
  return text.trim();
}

function ipAddress(text: string): string {
  if (isIP(text.trim()) === 0) throw new InvalidArgumentError('not an IP address (use the address of an interface, such as the pod IP, or 0.0.0.0)');
  return text.trim();
}

function readableFile(text: string): string {
  try {
    readFileSync(text);
  } catch (err) {
    throw new InvalidArgumentError(`cannot read ${text}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return text;
}

function runList(text: string): Set<'worker' | 'watcher'> {
  const parts = text.split(',').map((s) => s.trim());
  for (const p of parts) if (p !== 'worker' && p !== 'watcher') throw new InvalidArgumentError('takes worker, watcher or worker,watcher');
  return new Set(parts as ('worker' | 'watcher')[]);
}

function boolean(text: string): boolean {
  if (/^(true|1|yes)$/i.test(text)) return true;
  if (/^(false|0|no)$/i.test(text)) return false;
  throw new InvalidArgumentError('takes true or false');
}

// ---- the command --------------------------------------------------------------------------------

const ms = (n: number) => {
  if (n % 3_600_000 === 0) return `${n / 3_600_000}h`;
  if (n % 60_000 === 0) return `${n / 60_000}m`;
  if (n % 1000 === 0) return `${n / 1000}s`;
  return `${n}ms`;
};

/** Every option, its environment variable and default: the one list --help and the README show. */
export function operatorCommand(): Command {
  const d = DEFAULT_SETTINGS;
  const opt = (flags: string, description: string, env: string) => new Option(flags, description).env(env);
  return new Command('queen-operator')
    .description(
      'Runs the Queen operator: the watcher (decides which operation a QueenCluster needs and starts it as a ' +
        'Temporal workflow) and the worker (runs the workflows and their steps).',
    )
    .helpOption('-h, --help', 'show this help')
    .addOption(opt('--run <parts>', 'what this process runs: worker, watcher or both', 'QUEEN_RUN').argParser(runList).default(new Set(['worker', 'watcher']), 'worker,watcher'))
    .addOption(opt('--temporal-address <host:port>', 'the Temporal frontend', 'TEMPORAL_ADDRESS').argParser(hostPort).default('localhost:7233'))
    .addOption(opt('--temporal-namespace <name>', 'the Temporal namespace', 'TEMPORAL_NAMESPACE').argParser(nonEmpty).default('default'))
    .addOption(opt('--task-queue <name>', 'the task queue the watcher and the workers share', 'QUEEN_TASK_QUEUE').argParser(nonEmpty).default('queen-operator'))
    .addOption(opt('--temporal-tls [bool]', 'connect to Temporal with TLS (on by itself with a CA, a client certificate or an API key)', 'TEMPORAL_TLS').argParser(boolean).default(false))
    .addOption(opt('--temporal-tls-ca <file>', "PEM file of the CA that signs the frontend's certificate (default: the system's)", 'TEMPORAL_TLS_CA').argParser(readableFile))
    .addOption(opt('--temporal-tls-cert <file>', 'PEM file of the client certificate, for mutual TLS', 'TEMPORAL_TLS_CERT').argParser(readableFile))
    .addOption(opt('--temporal-tls-key <file>', 'PEM file of the key of the client certificate', 'TEMPORAL_TLS_KEY').argParser(readableFile))
    .addOption(opt('--temporal-tls-server-name <name>', 'the name to check the certificate against, if not the host of the address', 'TEMPORAL_TLS_SERVER_NAME').argParser(nonEmpty))
    .addOption(opt('--temporal-api-key-file <file>', 'a file holding the API key (or the key itself in TEMPORAL_API_KEY)', 'TEMPORAL_API_KEY_FILE').argParser(readableFile))
    .addOption(opt('--kubeconfig <file>', 'kubeconfig (default: the in-cluster account in a pod, else ~/.kube/config)', 'KUBECONFIG'))
    .addOption(opt('--namespace <ns,...>', 'namespaces to watch, repeatable (default: all)', 'QUEEN_NAMESPACES').argParser(namespaceList))
    .addOption(opt('--operator-namespace <ns>', "the namespace the operator runs in, let through to the brokers by each cluster's NetworkPolicy (default: its pod's)", 'QUEEN_OPERATOR_NAMESPACE').argParser(namespaceName))
    .addOption(opt('--broker-access <mode>', "how the brokers are reached: dns (a pod's name, in the cluster) or pod-ip (outside it)", 'QUEEN_BROKER_ACCESS').choices(['dns', 'pod-ip']).default('dns'))
    .addOption(opt('--resolver <host:port>', "resolve the pods' names through this DNS server instead of the system's", 'QUEEN_RESOLVER').argParser(hostPort))
    .addOption(opt('--bind-address <ip>', 'the address /healthz, /readyz and /metrics listen on (default: every interface)', 'QUEEN_BIND_ADDRESS').argParser(ipAddress))
    .addOption(opt('--health-port <port>', '/healthz and /readyz (0: off)', 'QUEEN_HEALTH_PORT').argParser(port).default(8081))
    .addOption(opt('--metrics-port <port>', 'Prometheus /metrics (0: off)', 'QUEEN_METRICS_PORT').argParser(port).default(9090))
    .addOption(opt('--workflow-bundle <file>', 'a prebuilt workflow bundle (the image has one)', 'QUEEN_WORKFLOW_BUNDLE').argParser(readableFile))
    // A waiting step heartbeats at each look, and Temporal retries it after 30s without one
    // (workflows/operation.ts); the observer's limit is 60s (workflows/observer.ts).
    .addOption(opt('--poll-interval <duration>', "how often a waiting step looks again at what the brokers show; a change of the cluster's objects wakes it at once (100ms to 10s)", 'QUEEN_POLL_INTERVAL').argParser(durationWithin('100ms', '10s', 'a waiting step heartbeats at each look, and is given up after 30s without one')).default(d.pollMs, ms(d.pollMs)))
    .addOption(opt('--observe-interval <duration>', 'how often a cluster at rest is looked at, and soon after one of its objects or its spec changes (500ms to 5m)', 'QUEEN_OBSERVE_INTERVAL').argParser(durationWithin('500ms', '5m', 'the status of a cluster at rest is that old at most')).default(d.observeIntervalMs, ms(d.observeIntervalMs)))
    .addOption(opt('--probe-interval <duration>', 'how often the write probe behind COMMITS runs at rest (1s to 24h)', 'QUEEN_PROBE_INTERVAL').argParser(durationWithin('1s', '24h')).default(d.probeIntervalMs, ms(d.probeIntervalMs)))
    .addOption(opt('--stall-after <duration>', 'a voter behind the leader that has not moved this long is stalled (1s to 24h)', 'QUEEN_STALL_AFTER').argParser(durationWithin('1s', '24h')).default(d.stallAfterMs, ms(d.stallAfterMs)))
    .addOption(opt('--settle-timeout <duration>', 'how long an upgrade waits for the cluster after its last restart (10s to 24h)', 'QUEEN_SETTLE_TIMEOUT').argParser(durationWithin('10s', '24h')).default(d.settleTimeoutMs, ms(d.settleTimeoutMs)))
    .addOption(opt('--drain-wait <duration>', "before a node leaves the membership, how long its pod stays up once out of the client Service's endpoints, for clients to see it and requests in flight to finish (0s to 10m)", 'QUEEN_DRAIN_WAIT').argParser(durationWithin('0s', '10m')).default(d.drainMs, ms(d.drainMs)))
    .addOption(opt('--shutdown-grace <duration>', "on SIGTERM, how long running steps may take to finish (0s to 1h; keep it under the pod's terminationGracePeriodSeconds)", 'QUEEN_SHUTDOWN_GRACE').argParser(durationWithin('0s', '1h')).default(20_000, '20s'))
    .addOption(opt('--max-concurrent-steps <n>', 'how many steps this replica runs at once: each wait for the machine (a pod to be Ready, a learner to catch up) holds one while it waits; a wait for a person holds none (1 to 10000)', 'QUEEN_MAX_CONCURRENT_STEPS').argParser(countWithin(1, 10_000)).default(200))
    .addOption(opt('--unhealthy-after <duration>', '/healthz fails once the watches have been broken this long (10s to 24h)', 'QUEEN_UNHEALTHY_AFTER').argParser(durationWithin('10s', '24h')).default(120_000, '2m'))
    .addOption(opt('--log-level <level>', 'how much the log says', 'LOG_LEVEL').choices(LOG_LEVELS).default('info'))
    .addOption(opt('--log-format <format>', 'json (a line of JSON per event), pretty (readable lines), or auto: pretty when stdout is a terminal, json otherwise (a pod)', 'LOG_FORMAT').choices(LOG_FORMATS).default('auto'))
    .allowExcessArguments(false)
    .exitOverride()
    .configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
}

export class OptionsError extends Error {
  override name = 'OptionsError';
}

/**
 * Parses argv and the environment. Returns the usage text for --help, or the options; a bad value
 * throws an OptionsError whose message names the flag (or its variable) and says what it takes.
 */
export function parseOptions(argv: string[], env: NodeJS.ProcessEnv): Options | { help: string } {
  const cmd = operatorCommand();
  const saved = process.env;
  // commander reads the environment from process.env: give it the one we were handed.
  process.env = env;
  try {
    cmd.parse(argv, { from: 'user' });
  } catch (err) {
    const e = err as { code?: string; message?: string };
    if (e.code === 'commander.helpDisplayed' || e.code === 'commander.help') return { help: cmd.helpInformation() };
    throw new OptionsError((e.message ?? String(err)).replace(/^error: /, ''));
  } finally {
    process.env = saved;
  }
  const o = cmd.opts<Record<string, unknown>>();
  const apiKeyFile = o.temporalApiKeyFile as string | undefined;
  const apiKey = apiKeyFile ? readFileSync(apiKeyFile, 'utf8').trim() : env.TEMPORAL_API_KEY?.trim() || undefined;
  if (apiKeyFile && !apiKey) throw new OptionsError(`--temporal-api-key-file ${apiKeyFile} is empty`);
  if (!!o.temporalTlsCert !== !!o.temporalTlsKey) {
    throw new OptionsError('--temporal-tls-cert and --temporal-tls-key (TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY) go together: give both for mutual TLS, or neither');
  }
  const tls = (o.temporalTls as boolean) || !!o.temporalTlsCa || !!o.temporalTlsCert || !!apiKey;
  return {
    run: o.run as Set<'worker' | 'watcher'>,
    temporal: {
      address: o.temporalAddress as string,
      namespace: o.temporalNamespace as string,
      taskQueue: o.taskQueue as string,
      tls,
      tlsCa: o.temporalTlsCa as string | undefined,
      tlsCert: o.temporalTlsCert as string | undefined,
      tlsKey: o.temporalTlsKey as string | undefined,
      tlsServerName: o.temporalTlsServerName as string | undefined,
      apiKey,
    },
    kubeconfig: o.kubeconfig as string | undefined,
    namespaces: [...new Set((o.namespace as string[] | undefined) ?? [])],
    operatorNamespace: (o.operatorNamespace as string | undefined) ?? podNamespace(),
    resolver: o.resolver as string | undefined,
    bindAddress: o.bindAddress as string | undefined,
    healthPort: (o.healthPort as number) || null,
    metricsPort: (o.metricsPort as number) || null,
    workflowBundle: o.workflowBundle as string | undefined,
    shutdownGraceMs: o.shutdownGrace as number,
    maxConcurrentSteps: o.maxConcurrentSteps as number,
    unhealthyAfterMs: o.unhealthyAfter as number,
    logLevel: o.logLevel as LogLevel,
    logFormat: o.logFormat as LogFormat,
    settings: {
      ...DEFAULT_SETTINGS,
      brokerAccess: o.brokerAccess as Settings['brokerAccess'],
      pollMs: o.pollInterval as number,
      observeIntervalMs: o.observeInterval as number,
      probeIntervalMs: o.probeInterval as number,
      stallAfterMs: o.stallAfter as number,
      settleTimeoutMs: o.settleTimeout as number,
      drainMs: o.drainWait as number,
    },
  };
}
