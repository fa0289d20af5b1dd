// A load client: pushes a steady rate of messages through a Service the way a client inside the
// cluster would reach it (kube-proxy picks a ready endpoint of the Service for each connection;
// here the client picks one from the Service's EndpointSlices), records every acknowledgement,
// failure and retry, and afterwards checks that every acknowledged message is in the committed
// log of every voter.
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { Informer, Kube, type KObject, type KubeAuth } from './kube.ts';

export interface LoadOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /**
   * The client Service (default "queen"), or several: a push goes to a ready endpoint of any of
   * them, and is retried on another when refused (a client that follows a switchover: a standby
   * answers 503 `standby` until it is promoted).
   */
  service?: string | string[];
  /** Messages a second (default 50). */
  rate?: number;
  /** Queue name (default "q"). */
  queue?: string;
  /** Target port on the endpoints (default 6632). */
  port?: number;
  /** Client timeout of one push attempt (default 10 s). */
  attemptTimeoutMs?: number;
  /** Bytes of payload per message (default: a small JSON object). */
  payloadBytes?: number;
  /** Messages per push request (default 1): 500 messages a second as 50 pushes of 10. */
  batch?: number;
  /**
   * The address the client's connections leave from: a client pod's IP, so that NetworkPolicies
   * see the pushes coming from that pod (default: this machine's, which they let through).
   */
  sourceIp?: string;
  /** Extra request headers (an Authorization header, ...). */
  headers?: Record<string, string>;
  /** A message is given up after this long without an acknowledgement (default 60 s). */
  giveUpAfterMs?: number;
  log?: (line: string) => void;
}

export interface FailedAttempt {
  transactionId: string;
  attempt: number;
  endpoint: string;
  /** When the attempt was sent, and when it failed. */
  sentAt: string;
  at: string;
  reason: string;
}

export interface LoadReport {
  queue: string;
  durationMs: number;
  sent: number;
  acknowledged: number;
  acknowledgedFirstTry: number;
  /** Messages acknowledged only after more than one attempt. */
  retried: number;
  /** Every attempt that failed, with its reason. */
  failedAttempts: FailedAttempt[];
  /** Messages never acknowledged (given up, or still unanswered when the load stopped). */
  unacknowledged: string[];
  acknowledgedIds: string[];
  /** The message id each acknowledged message was given (transactionId → messageId), as the push answered. */
  messageIds: Record<string, string>;
  /** When each acknowledged message was acknowledged (ms since the epoch), by transactionId. */
  acknowledgedAt: Record<string, number>;
  /** Endpoint addresses the pushes went to, with the count of acknowledgements each gave. */
  endpoints: Record<string, number>;
  /** How late, at most, a push was sent after its time (the client's own process was busy): ms and when. */
  maxSendDelay: { ms: number; at: string | null };
  /** The endpoints pushes were sent to, each time they changed (as the client saw it). */
  endpointChanges: { at: string; endpoints: string[] }[];
}

export interface Load {
  /** Counts so far. */
  progress(): { sent: number; acknowledged: number; failedAttempts: number; inFlight: number };
  /** Stops sending, waits for the messages in flight (their retries included), returns the report. */
  stop(): Promise<LoadReport>;
}

/** Server, CA and token of a KubeConfig that authenticates with a token (as the test bed's do). */
export function authOf(kc: KubeConfig): KubeAuth {
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (!cluster || !user?.token) throw new Error('the load client needs a kubeconfig with a server and a bearer token (the test bed writes such)');
  const ca = cluster.caData ? Buffer.from(cluster.caData, 'base64').toString() : cluster.caFile ? readFileSync(cluster.caFile, 'utf8') : '';
  return { server: cluster.server, ca, token: user.token };
}

interface Endpoint {
  ip: string;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function startLoad(opts: LoadOptions): Load {
  const services = [opts.service ?? 'queen'].flat();
  const rate = opts.rate ?? 50;
  const queue = opts.queue ?? 'q';
  const port = opts.port ?? 6632;
  const attemptTimeout = opts.attemptTimeoutMs ?? 10_000;
  const giveUpAfter = opts.giveUpAfterMs ?? 60_000;
  const batch = Math.max(1, Math.floor(opts.batch ?? 1));
  const filler = opts.payloadBytes && opts.payloadBytes > 0 ? 'x'.repeat(opts.payloadBytes) : null;
  const log = opts.log ?? (() => {});
  const kube = new Kube(authOf(opts.kubeConfig));
  const slices = new Informer<KObject>(kube, `/apis/discovery.k8s.io/v1/namespaces/${opts.namespace}/endpointslices`, {
    query: { labelSelector: services.length === 1 ? `kubernetes.io/service-name=${services[0]}` : `kubernetes.io/service-name in (${services.join(',')})` },
    log,
  });
  void slices.start();
  // New connections per request would be closer to kube-proxy's per-connection choice; a keep-alive
  // pool per endpoint is what a real HTTP client does and costs far less. A push picks its endpoint
  // only once a connection to it is free (as kube-proxy picks one when a connection is made): a
  // push queued in the pool of an endpoint would still go to it after it left the Service.
  const CONNECTIONS = 16;
  const agent = new Agent({ keepAliveTimeout: 4000, connections: CONNECTIONS, ...(opts.sourceIp ? { localAddress: opts.sourceIp } : {}) });
  const busy = new Map<string, number>();
  // Pushes waiting for a free connection, first come first served: one is woken per freed
  // connection, all when the endpoints change.
  const waiting: (() => void)[] = [];
  const release = (ip: string) => {
    busy.set(ip, (busy.get(ip) ?? 1) - 1);
    waiting.shift()?.();
  };

  const endpoints = (): Endpoint[] => {
    const out = new Map<string, Endpoint>();
    for (const s of slices.list()) {
      if ((s as any).addressType !== 'IPv4') continue;
      for (const ep of ((s as any).endpoints ?? []) as any[]) {
        const c = ep.conditions ?? {};
        for (const ip of ep.addresses ?? []) out.set(ip, { ip, ready: c.ready !== false, serving: c.serving !== false, terminating: c.terminating === true });
      }
    }
    return [...out.values()];
  };
  // kube-proxy: ready endpoints; when there are none, serving terminating ones.
  const candidates = (): string[] => {
    const eps = endpoints();
    const ready = eps.filter((e) => e.ready).map((e) => e.ip);
    if (ready.length) return ready;
    return eps.filter((e) => e.serving && e.terminating).map((e) => e.ip);
  };

  const endpointChanges: LoadReport['endpointChanges'] = [];
  let maxSendDelay: LoadReport['maxSendDelay'] = { ms: 0, at: null };
  const noteEndpoints = () => {
    const now = candidates().sort();
    if (JSON.stringify(endpointChanges.at(-1)?.endpoints) !== JSON.stringify(now)) {
      endpointChanges.push({ at: new Date().toISOString(), endpoints: now });
      for (const w of waiting.splice(0)) w();
    }
  };
  slices.on({ add: noteEndpoints, update: noteEndpoints, delete: noteEndpoints });

  const prefix = `load-${randomBytes(3).toString('hex')}`;
  const began = Date.now();
  let sent = 0;
  let acknowledged = 0;
  let acknowledgedFirstTry = 0;
  let retried = 0;
  const failedAttempts: FailedAttempt[] = [];
  const ackedIds: string[] = [];
  const messageIds: Record<string, string> = {};
  const ackedAt: Record<string, number> = {};
  const unacked = new Set<string>();
  const perEndpoint: Record<string, number> = {};
  const inFlight = new Set<Promise<void>>();
  let stopping = false;
  let rr = 0;

  const attempt = async (ids: string[], ip: string, n: number): Promise<string | null> => {
    try {
      const at = new Date().toISOString();
      const items = ids.map((id, i) => ({ queue, payload: filler ? { n: n + i, at, data: filler } : { n: n + i, at }, transactionId: id }));
      const res = await request(`http://${ip}:${port}/api/v1/push`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', ...(opts.headers ?? {}) },
        body: JSON.stringify({ items }),
        headersTimeout: attemptTimeout,
        bodyTimeout: attemptTimeout,
      });
      const text = await res.body.text();
      // The broker acknowledges a push with 201 Created (a 200 would be no broker's answer).
      if (res.statusCode === 201) {
        try {
          for (const r of JSON.parse(text) as { transactionId?: string; messageId?: string }[]) if (r.transactionId && r.messageId) messageIds[r.transactionId] = r.messageId;
        } catch {
          // an answer without ids: the acknowledgement stands
        }
        return null;
      }
      let code = '';
      try {
        code = JSON.parse(text).code ?? '';
      } catch {
        // not JSON
      }
      return `HTTP ${res.statusCode}${code ? ` ${code}` : ''}`;
    } catch (e) {
      const err = e as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
      const code = err.code ?? err.cause?.code ?? err.name;
      return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' ? `timeout after ${attemptTimeout} ms` : String(code || err.message);
    }
  };

  // One push of `count` messages from number n: acknowledged together, retried together.
  const pushOne = async (n: number, count: number) => {
    const ids = Array.from({ length: count }, (_, i) => `${prefix}-${n + i}`);
    const id = ids[0]!;
    for (const x of ids) unacked.add(x);
    const deadline = Date.now() + giveUpAfter;
    let tries = 0;
    let lastFailed: string | undefined;
    // Woken from the queue of waiting pushes: it goes before the pushes that came after it.
    let woken = false;
    for (;;) {
      const cands = candidates();
      // Another endpoint than the one that just failed, when there is one.
      const pool = (cands.length > 1 && lastFailed ? cands.filter((c) => c !== lastFailed) : cands).filter((c) => (busy.get(c) ?? 0) < CONNECTIONS);
      // Every connection busy, or pushes that came first still wait: wait for a free connection
      // (or the endpoints to change), then pick. First come, first served.
      if (!pool.length || (!woken && waiting.length > 0)) {
        if (Date.now() > deadline) {
          // Given up: the wake it had goes to the next push that waits.
          if (woken) waiting.shift()?.();
          return;
        }
        if (cands.length) {
          await new Promise<void>((r) => (woken ? waiting.unshift(r) : waiting.push(r)));
          woken = true;
        } else await sleep(100);
        continue;
      }
      woken = false;
      const ip = pool[rr++ % pool.length]!;
      tries++;
      const sentAt = new Date().toISOString();
      busy.set(ip, (busy.get(ip) ?? 0) + 1);
      const failure = await attempt(ids, ip, n).finally(() => release(ip));
      if (failure === null) {
        acknowledged += count;
        if (tries === 1) acknowledgedFirstTry += count;
        else retried += count;
        const at = Date.now();
        for (const x of ids) {
          ackedIds.push(x);
          ackedAt[x] = at;
          unacked.delete(x);
        }
        perEndpoint[ip] = (perEndpoint[ip] ?? 0) + count;
        return;
      }
      failedAttempts.push({ transactionId: id, attempt: tries, endpoint: ip, sentAt, at: new Date().toISOString(), reason: failure });
      lastFailed = ip;
      if (Date.now() > deadline) return;
      await sleep(100);
    }
  };

  // A push of `batch` messages every batch / rate seconds.
  const interval = (1000 * batch) / rate;
  const ticker = (async () => {
    await slices.start();
    const t0 = Date.now();
    let k = 0;
    while (!stopping) {
      const due = t0 + k * interval;
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      else if (-wait > maxSendDelay.ms) maxSendDelay = { ms: -wait, at: new Date().toISOString() };
      if (stopping) break;
      sent += batch;
      const p = pushOne(k * batch, batch).finally(() => inFlight.delete(p));
      k++;
      inFlight.add(p);
    }
  })();

  return {
    progress: () => ({ sent, acknowledged, failedAttempts: failedAttempts.length, inFlight: inFlight.size }),
    async stop() {
      stopping = true;
      await ticker;
      await Promise.all([...inFlight]);
      slices.stop();
      await agent.close();
      await kube.close();
      return {
        queue,
        durationMs: Date.now() - began,
        sent,
        acknowledged,
        acknowledgedFirstTry,
        retried,
        failedAttempts,
        unacknowledged: [...unacked],
        acknowledgedIds: ackedIds,
        messageIds,
        acknowledgedAt: ackedAt,
        endpoints: perEndpoint,
        maxSendDelay,
        endpointChanges,
      };
    },
  };
}

export interface VerifyResult {
  /** Acknowledged ids missing from at least one voter's committed log. */
  missing: string[];
  /** Per voter address: the acknowledged ids its committed log lacks. */
  perVoter: Record<string, string[]>;
}

/**
 * Polls every voter's committed log (GET /_sim/committed?queue=) until each holds every
 * acknowledged message, or the deadline passes. Returns the ids still missing somewhere.
 */
export async function verifyAcknowledgedDetail(report: LoadReport, voterIps: string[], opts: { timeoutMs?: number; port?: number } = {}): Promise<VerifyResult> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  const port = opts.port ?? 6632;
  let perVoter: Record<string, string[]> = {};
  for (;;) {
    perVoter = {};
    for (const ip of voterIps) {
      try {
        const res = await request(`http://${ip}:${port}/_sim/committed?queue=${encodeURIComponent(report.queue)}`, { headersTimeout: 5000, bodyTimeout: 5000 });
        const body: any = await res.body.json();
        const have = new Set<string>(res.statusCode === 200 ? (body.transactionIds ?? []) : []);
        perVoter[ip] = report.acknowledgedIds.filter((id) => !have.has(id));
      } catch {
        perVoter[ip] = [...report.acknowledgedIds];
      }
    }
    const missing = [...new Set(Object.values(perVoter).flat())];
    if (!missing.length || Date.now() > deadline) return { missing, perVoter };
    await sleep(500);
  }
}

export async function verifyAcknowledged(report: LoadReport, voterIps: string[], opts: { timeoutMs?: number; port?: number } = {}): Promise<string[]> {
  return (await verifyAcknowledgedDetail(report, voterIps, opts)).missing;
}

/**
 * The clients' write downtime: the longest time, while the load ran, without any acknowledgement
 * (a push is due every 1/rate s), and when it began.
 */
export function longestWriteGap(report: LoadReport): { ms: number; from: number | null } {
  const times = Object.values(report.acknowledgedAt).sort((a, b) => a - b);
  let best = { ms: 0, from: null as number | null };
  for (let i = 1; i < times.length; i++) if (times[i]! - times[i - 1]! > best.ms) best = { ms: times[i]! - times[i - 1]!, from: times[i - 1]! };
  return best;
}
