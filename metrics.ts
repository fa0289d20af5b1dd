// The operator's Prometheus metrics (prom-client), served on --metrics-port at /metrics together
// with the Temporal SDK's own worker metrics (its exporter listens on a private loopback port and
// its text is appended). What each family means is in its help text; the README's metrics
// section shows an excerpt.
import { subscribe } from 'node:diagnostics_channel';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { QueenCluster } from './crd/schema.ts';

export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'queen_process_' });

const DURATIONS = [0.05, 0.25, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200];

export const operationsStarted = new Counter({
  name: 'queen_operations_started_total',
  help: 'Operations started, by type (FormCluster, RollingUpgrade, ScaleVoters, ReplaceNode, GrowVolumes).',
  labelNames: ['type'] as const,
  registers: [registry],
});

export const operationsEnded = new Counter({
  name: 'queen_operations_ended_total',
  help: 'Operations ended, by type and result (Succeeded, Failed, Cancelled, Yielded, RolledBack; Terminated: ended from outside, by temporal workflow terminate or a timeout).',
  labelNames: ['type', 'result'] as const,
  registers: [registry],
});

export const operationDuration = new Histogram({
  name: 'queen_operation_duration_seconds',
  help: 'How long operations took, from their first step to their end, by type and result.',
  labelNames: ['type', 'result'] as const,
  buckets: DURATIONS,
  registers: [registry],
});

export const stepDuration = new Histogram({
  name: 'queen_step_duration_seconds',
  help: 'How long each attempt of a step (an activity) took, by step and outcome (completed, failed, cancelled).',
  labelNames: ['step', 'outcome'] as const,
  buckets: DURATIONS,
  registers: [registry],
});

export const stepFailures = new Counter({
  name: 'queen_step_failures_total',
  help: "Failed attempts of an operation's steps that are tried again, by cluster and step: a step failing again and again is said in status from its third attempt (StepFailing).",
  labelNames: ['namespace', 'name', 'step'] as const,
  registers: [registry],
});

export const gateWait = new Counter({
  name: 'queen_gate_wait_seconds_total',
  help: 'Seconds steps spent held by each named gate (pod-ready-for-min-ready-seconds, write-commits, not-paused...).',
  labelNames: ['namespace', 'name', 'gate'] as const,
  registers: [registry],
});

export const leaderChanges = new Counter({
  name: 'queen_cluster_leader_changes_total',
  help: 'Leader term changes the observer saw, per cluster.',
  labelNames: ['namespace', 'name'] as const,
  registers: [registry],
});

export const brokerCallFailures = new Counter({
  name: 'queen_broker_call_failures_total',
  help: 'Broker calls that failed, by call (health, membership, change, probe) and kind (refused, timeout, http_5xx, a refusal code...).',
  labelNames: ['call', 'kind'] as const,
  registers: [registry],
});

export const apiServerRequests = new Counter({
  name: 'queen_apiserver_requests_total',
  help: 'Requests to the Kubernetes API server, by verb (get, watch, post, patch, delete...), resource (pods, queenclusters/status...) and HTTP code (0: no answer).',
  labelNames: ['verb', 'resource', 'code'] as const,
  registers: [registry],
});

export const apiServerLatency = new Histogram({
  name: 'queen_apiserver_request_duration_seconds',
  help: 'Time from a request to the Kubernetes API server until the headers of its answer, by verb (watches not counted); queen_apiserver_request_queued_seconds is its part before the request was sent.',
  labelNames: ['verb'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});

export const apiServerQueued = new Histogram({
  name: 'queen_apiserver_request_queued_seconds',
  help: 'Time a request to the Kubernetes API server waited in the operator before it was sent (a connection free), by verb.',
  labelNames: ['verb'] as const,
  buckets: [0.001, 0.005, 0.025, 0.1, 0.25, 1, 5],
  registers: [registry],
});

export const observerRounds = new Gauge({
  name: 'queen_observer_rounds',
  help: 'Clusters this process observes now. A round holds no activity slot: it completes its activity asynchronously.',
  registers: [registry],
});

/**
 * The task queue's backlog (tasks no worker has taken up yet), by type (workflow, activity), read
 * from Temporal at scrape time; with temporal_worker_task_slots_available and _used, whether the
 * workers keep up.
 */
export function registerTaskQueueBacklog(read: (type: 'workflow' | 'activity') => Promise<number | null>): void {
  new Gauge({
    name: 'queen_task_queue_backlog',
    help: "Tasks waiting in the operator's task queue for a worker, by type (workflow, activity), as Temporal estimates them.",
    labelNames: ['type'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const type of ['workflow', 'activity'] as const) {
        const n = await read(type).catch(() => null);
        if (n !== null) this.set({ type }, n);
      }
    },
  });
}

/** Every QueenCluster as the process's watches have it, read at scrape time (every replica's is complete). */
export interface ClusterGaugeSource {
  clusters(): QueenCluster[];
}

interface ClusterGauges {
  namespace: string;
  name: string;
  phase: string | null;
  /** The running operation, as status.operation names it, with the gate that holds it ('' for none). */
  operation: { type: string; gate: string } | null;
  commits: boolean | null;
  voters: number;
  learners: number;
  term: number | null;
  /** The running operation waits for a person (status.operation.parked): at which gate, since when (ms). */
  parked: { type: string; gate: string; since: number } | null;
}

const PHASES = ['Forming', 'Ready', 'Scaling', 'Upgrading', 'Replacing', 'Resizing', 'Degraded', 'Blocked'];

/** The per-cluster gauges, from the watches' view of the QueenClusters. */
export function registerClusterGauges(source: ClusterGaugeSource): void {
  const each = (fn: (c: ClusterGauges) => void) => {
    for (const qc of source.clusters()) {
      const st = qc.status;
      fn({
        namespace: qc.metadata.namespace,
        name: qc.metadata.name,
        phase: st?.phase ?? null,
        operation: st?.operation?.type ? { type: st.operation.type, gate: st.operation.gate ?? '' } : null,
        commits: typeof st?.commits === 'boolean' ? st.commits : null,
        voters: st?.voters?.length ?? 0,
        learners: st?.learners?.length ?? 0,
        term: typeof st?.term === 'number' ? st.term : null,
        parked: st?.operation?.parked ? { type: st.operation.type, gate: st.operation.gate ?? '', since: Date.parse(st.operation.parked.since) } : null,
      });
    }
  };
  new Gauge({
    name: 'queen_cluster_phase',
    help: 'The phase of each cluster: 1 for the phase it is in, 0 for the others.',
    labelNames: ['namespace', 'name', 'phase'] as const,
    registers: [registry],
    collect() {
      this.reset();
      each((c) => {
        for (const p of PHASES) this.set({ namespace: c.namespace, name: c.name, phase: p }, c.phase === p ? 1 : 0);
      });
    },
  });
  new Gauge({
    name: 'queen_cluster_operation',
    help: "1 for each cluster's running operation, by type and the gate that holds it now ('' when none; worker-polling: it waits for a worker, step-succeeds: a step keeps failing).",
    labelNames: ['namespace', 'name', 'type', 'gate'] as const,
    registers: [registry],
    collect() {
      this.reset();
      each((c) => c.operation && this.set({ namespace: c.namespace, name: c.name, type: c.operation.type, gate: c.operation.gate }, 1));
    },
  });
  new Gauge({
    name: 'queen_cluster_commits',
    help: 'COMMITS: 1 while the last write probe committed, 0 when it did not (absent before the first probe).',
    labelNames: ['namespace', 'name'] as const,
    registers: [registry],
    collect() {
      this.reset();
      each((c) => c.commits !== null && this.set({ namespace: c.namespace, name: c.name }, c.commits ? 1 : 0));
    },
  });
  new Gauge({
    name: 'queen_cluster_voters',
    help: "Voters in each cluster's membership, as the leader last showed it.",
    labelNames: ['namespace', 'name'] as const,
    registers: [registry],
    collect() {
      this.reset();
      each((c) => this.set({ namespace: c.namespace, name: c.name }, c.voters));
    },
  });
  new Gauge({
    name: 'queen_cluster_learners',
    help: "Learners in each cluster's membership.",
    labelNames: ['namespace', 'name'] as const,
    registers: [registry],
    collect() {
      this.reset();
      each((c) => this.set({ namespace: c.namespace, name: c.name }, c.learners));
    },
  });
  new Gauge({
    name: 'queen_cluster_leader_term',
    help: "The leader's term in each cluster (a change is a leader change).",
    labelNames: ['namespace', 'name'] as const,
    registers: [registry],
    collect() {
      this.reset();
      each((c) => c.term !== null && this.set({ namespace: c.namespace, name: c.name }, c.term));
    },
  });
  new Gauge({
    name: 'queen_operation_waiting_for_person_since_seconds',
    help: 'An operation that waits for a person (an approval, a pause, a failed version held, a Blocked hold): when it began to, in seconds since the epoch, by gate. It holds no worker slot meanwhile.',
    labelNames: ['namespace', 'name', 'type', 'gate'] as const,
    registers: [registry],
    collect() {
      this.reset();
      each((c) => c.parked && Number.isFinite(c.parked.since) && this.set({ namespace: c.namespace, name: c.name, type: c.parked.type, gate: c.parked.gate }, c.parked.since / 1000));
    },
  });
}

/** The clusters whose observer runs its round in this process (queen_cluster_observed), read at scrape time. */
export function registerObservedClusters(observed: () => Array<{ namespace: string; name: string }>): void {
  new Gauge({
    name: 'queen_cluster_observed',
    help: 'Clusters whose observer (health, membership, the write probe behind COMMITS) runs in this process: 1 each. A cluster no replica reports here has no observer.',
    labelNames: ['namespace', 'name'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const c of observed()) this.set({ namespace: c.namespace, name: c.name }, 1);
    },
  });
}

/** A gauge read at scrape time. */
export function registerGauge(name: string, help: string, read: () => Promise<number | null> | number | null): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    async collect() {
      const v = await read();
      if (v !== null) this.set(v);
    },
  });
}

/**
 * The resource a request to the API server is about, with its subresource: `pods`,
 * `queenclusters/status`, `statefulsets`, `leases`... (`other` for discovery and the like).
 */
export function apiResource(path: string): string {
  const parts = path.split('?')[0]!.split('/').filter(Boolean);
  // /api/v1/... or /apis/<group>/<version>/...
  const rest = parts[0] === 'api' ? parts.slice(2) : parts[0] === 'apis' ? parts.slice(3) : null;
  if (!rest || rest.length === 0) return 'other';
  const scoped = rest[0] === 'namespaces' && rest.length >= 3 ? rest.slice(2) : rest;
  const [resource, , subresource] = scoped;
  return subresource ? `${resource}/${subresource}` : resource!;
}

let counting = false;
/**
 * Counts the requests to the API server at `origin` (https://host:port), whoever sends them (the
 * typed client and our own requests both go through undici, which reports on diagnostics channels).
 */
export function countApiServerRequests(origin: string): void {
  if (counting) return;
  counting = true;
  const ours = origin.replace(/\/$/, '');
  const verb = (method: string, path: string) => (/[?&]watch=(true|1)/.test(path) ? 'watch' : method.toLowerCase());
  // When each request was made and sent (performance.now()).
  const made = new WeakMap<object, number>();
  const sent = new WeakMap<object, number>();
  subscribe('undici:request:create', (msg) => {
    const { request } = msg as { request: { origin: string } };
    if (String(request.origin).replace(/\/$/, '') === ours) made.set(request, performance.now());
  });
  subscribe('undici:client:sendHeaders', (msg) => {
    const { request } = msg as { request: object };
    if (made.has(request)) sent.set(request, performance.now());
  });
  subscribe('undici:request:headers', (msg) => {
    const { request, response } = msg as { request: { method: string; path: string; origin: string }; response: { statusCode: number } };
    if (String(request.origin).replace(/\/$/, '') !== ours) return;
    const v = verb(request.method, request.path);
    apiServerRequests.inc({ verb: v, resource: apiResource(request.path), code: String(response.statusCode) });
    const start = made.get(request);
    if (start === undefined || v === 'watch') return;
    const now = performance.now();
    apiServerLatency.observe({ verb: v }, (now - start) / 1000);
    apiServerQueued.observe({ verb: v }, ((sent.get(request) ?? start) - start) / 1000);
  });
  subscribe('undici:request:error', (msg) => {
    const { request } = msg as { request: { method: string; path: string; origin: string } };
    if (String(request.origin).replace(/\/$/, '') === ours) apiServerRequests.inc({ verb: verb(request.method, request.path), resource: apiResource(request.path), code: '0' });
  });
}

/** The exposition: ours, then the Temporal SDK's (from its exporter on `sdkUrl`), if it answers. */
export async function exposition(sdkUrl: string | null): Promise<string> {
  const ours = await registry.metrics();
  if (!sdkUrl) return ours;
  try {
    const res = await fetch(sdkUrl, { signal: AbortSignal.timeout(2000) });
    return `${ours}\n${await res.text()}`;
  } catch {
    return ours;
  }
}
