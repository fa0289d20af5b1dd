// The broker client: the HTTP routes an operator uses on a Queen node (port 6632), with timeouts
// and typed refusals. See shared/reference/queen-broker-api.md sections 1 and 2.
import { Resolver } from 'node:dns';
import { Agent, request } from 'node:http';
import type { LookupFunction } from 'node:net';
import { brokerCallFailures } from '../metrics.ts';
import type { HealthObservation, MembershipObservation, MemberObservation } from '../plan/observation.ts';

// Node's own HTTP client: a look at a resting cluster is a new connection and two small requests
// (a node closes an idle connection after a second or two), and this client does that for about
// two thirds of the CPU undici takes (measured: 3.7% against 5.5% of a core for 20 looks a
// second). Idle connections are kept for the next request until the node's Keep-Alive hint
// (less a second), so a call never goes out on a connection the node is closing.
const agent = new Agent({ keepAlive: true, maxSockets: 16, timeout: 10_000 });
let lookup: LookupFunction | undefined;

/**
 * Resolves the pods' names through this DNS server (host:port) instead of the system's: for an
 * operator outside the cluster that can reach the cluster's DNS, and for the test bed.
 */
export function useResolver(server: string): void {
  const resolver = new Resolver({ timeout: 2000, tries: 2 });
  resolver.setServers([server]);
  lookup = (hostname, options, callback) => {
    resolver.resolve4(hostname, (err, addresses) => {
      if (err || addresses.length === 0) {
        callback(err ?? Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 4);
        return;
      }
      if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, addresses.map((address) => ({ address, family: 4 })));
      else callback(null, addresses[0]!, 4);
    });
  };
}

export const TIMEOUTS = { healthMs: 3000, membershipMs: 3000, changeMs: 40_000, probeMs: 5000 } as const;

/**
 * How a refusal is handled. Transient codes fix themselves (a change in flight, an election, a
 * learner still catching up) and are retried with backoff; permanent ones need a person.
 */
export type RefusalKind = 'transient' | 'permanent';

const PERMANENT_CODES = new Set([
  'address_mismatch',
  'forbidden',
  'bad_request',
  'last_voter',
  'kinds_behind',
  'already_voter',
  'not_a_learner',
  'not_a_member',
  'membership_invalid',
  'unsupported',
  'unauthorized',
  'http_401',
  'http_403',
  'http_404',
]);

export function classifyRefusal(code: string): RefusalKind {
  return PERMANENT_CODES.has(code) ? 'permanent' : 'transient';
}

/** What a person can do about a permanent refusal, in one line. */
export function refusalAdvice(code: string, nodeId?: number): string {
  const node = nodeId === undefined ? 'the node' : `node ${nodeId}`;
  switch (code) {
    case 'address_mismatch':
      return `${node} is in the membership with other addresses: remove it from the membership first`;
    case 'forbidden':
    case 'unauthorized':
    case 'http_401':
    case 'http_403':
      return "the broker refuses the operator's credentials on its membership API: with JWT_ENABLED, spec.adminTokenSecret must name a Secret key that holds a token with the Admin role";
    case 'last_voter':
      return `${node} is the last voter and cannot leave the membership`;
    case 'kinds_behind':
      return `${node} runs a build older than the cluster's catalogue version: give it the cluster's version`;
    case 'already_voter':
      return `${node} is already a voter`;
    case 'not_a_learner':
    case 'not_a_member':
      return `${node} is not a member of the cluster`;
    case 'unsupported':
      return 'the broker does not support membership changes: it needs QUEEN_RAFT_PEERS and the openraft replicator';
    default:
      return 'see the broker log of the leader';
  }
}

export class BrokerError extends Error {
  readonly code: string | null;
  readonly status: number | null;
  constructor(message: string, code: string | null = null, status: number | null = null) {
    super(message);
    this.name = 'BrokerError';
    this.code = code;
    this.status = status;
  }
}

interface Answer {
  status: number;
  body: string;
  json: unknown;
}

/** A bearer token for the brokers' system routes (JWT_ENABLED), or none. */
export type BrokerToken = string | null | undefined;

/** One request with one deadline for all of it (connect, answer, body): past it, a TimeoutError. */
function call(url: string, method: string, timeoutMs: number, body?: unknown, token?: BrokerToken): Promise<Answer> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string> = {};
  if (payload !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(payload));
  }
  if (token) headers.authorization = `Bearer ${token}`;
  return new Promise<Answer>((resolve, reject) => {
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      req.destroy();
      reject(err);
    };
    const req = request(url, { method, agent, headers, ...(lookup ? { lookup } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', fail);
      res.on('close', () => {
        if (!res.complete) fail(Object.assign(new Error('the connection closed before the answer was complete'), { code: 'ECONNRESET' }));
      });
      res.on('end', () => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown = undefined;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, body: text, json });
      });
    });
    const deadline = setTimeout(() => fail(Object.assign(new Error(`no answer within ${timeoutMs / 1000}s`), { name: 'TimeoutError' })), timeoutMs);
    req.on('error', fail);
    req.end(payload);
  });
}

function describeError(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; code?: string; message?: string };
  if (e?.name === 'TimeoutError') {
    return `no answer within ${timeoutMs / 1000}s`;
  }
  if (e?.code === 'ECONNREFUSED') return 'connection refused';
  return e?.message ?? String(err);
}

const clip = (text: string, n = 200) => (text.length > n ? `${text.slice(0, n)}...` : text);

const num = (v: unknown, dflt = 0) => (typeof v === 'number' && Number.isFinite(v) ? v : dflt);
const numOrNull = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const ids = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is number => typeof x === 'number').sort((a, b) => a - b) : []);

/** Reads /health whatever its status: a 503 settling body is an answer too. Null: no answer. */
export function parseHealth(status: number, json: unknown): HealthObservation | null {
  const h = json as { status?: unknown; version?: unknown; raft?: Record<string, unknown> } | undefined;
  const raft = h?.raft;
  if (!raft || typeof raft.role !== 'string' || raft.role === '') return null;
  const apply = raft.apply as { failure?: unknown } | undefined;
  const failure = apply?.failure;
  return {
    status,
    healthy: status === 200,
    role: raft.role,
    leaderKnown: raft.leader === true,
    term: num(raft.term),
    applied: num(raft.applied),
    commit: num(raft.commit),
    lag: num(raft.lag),
    quorumAckMs: numOrNull(raft.quorumAckMs),
    version: typeof h?.version === 'string' ? h.version : '',
    applyFailure: failure && typeof failure === 'object' ? (failure as Record<string, unknown>) : null,
    clusterVersion: numOrNull(raft.clusterVersion),
    kinds: numOrNull(raft.kinds),
  };
}

export function parseMembership(json: unknown): MembershipObservation | null {
  const m = (json as { membership?: Record<string, unknown> } | undefined)?.membership;
  if (!m || typeof m !== 'object') return null;
  const members: MemberObservation[] = Array.isArray(m.members)
    ? (m.members as Record<string, unknown>[]).map((x) => ({
        nodeId: num(x.nodeId),
        voter: x.voter === true,
        raft: typeof x.raft === 'string' ? x.raft : null,
        http: typeof x.http === 'string' ? x.http : null,
        matched: numOrNull(x.matched),
        lag: numOrNull(x.lag),
        lastAckMs: numOrNull(x.lastAckMs),
        live: x.live === true,
        kinds: numOrNull(x.kinds),
      }))
    : [];
  return {
    nodeId: num(m.nodeId),
    source: typeof m.source === 'string' ? m.source : 'leader',
    viewAgeMs: numOrNull(m.viewAgeMs),
    leader: numOrNull(m.leader),
    term: num(m.term),
    voters: ids(m.voters),
    learners: ids(m.learners),
    joint: Array.isArray(m.joint) ? (m.joint as unknown[]).map(ids) : null,
    membershipIndex: numOrNull(m.membershipIndex),
    changeInFlight: m.changeInFlight === true,
    lastLogIndex: numOrNull(m.lastLogIndex),
    committedIndex: numOrNull(m.committedIndex),
    liveWithinMs: numOrNull(m.liveWithinMs),
    promoteMaxLag: num(m.promoteMaxLag, 1000),
    members,
  };
}

/**
 * The freshest of several membership views: the highest term, then the highest membership index,
 * a leader's own view before a follower's.
 */
export function freshestView<T extends { view: MembershipObservation }>(views: T[]): T | null {
  const rank = (v: MembershipObservation) => (v.source === 'leader' ? 2 : v.source === 'follower' ? 1 : 0);
  let best: T | null = null;
  for (const v of views) {
    if (!best) {
      best = v;
      continue;
    }
    const a = v.view;
    const b = best.view;
    const cmp = a.term - b.term || (a.membershipIndex ?? -1) - (b.membershipIndex ?? -1) || rank(a) - rank(b);
    if (cmp > 0) best = v;
  }
  return best;
}

/** The kind of a failed call, for queen_broker_call_failures_total: refused, timeout, http_<code>... */
function failureKind(err: unknown): string {
  const e = err as { name?: string; code?: string };
  if (e?.name === 'TimeoutError') return 'timeout';
  if (e?.code === 'ECONNREFUSED') return 'refused';
  if (e?.code === 'ENOTFOUND' || e?.code === 'EAI_AGAIN') return 'dns';
  if (e?.code === 'ECONNRESET' || e?.code === 'EPIPE') return 'reset';
  return 'other';
}

export async function readHealth(base: string, timeoutMs: number = TIMEOUTS.healthMs): Promise<HealthObservation | null> {
  try {
    const a = await call(`${base}/health`, 'GET', timeoutMs);
    const h = parseHealth(a.status, a.json);
    if (!h) brokerCallFailures.inc({ call: 'health', kind: `http_${a.status}` });
    return h;
  } catch (err) {
    brokerCallFailures.inc({ call: 'health', kind: failureKind(err) });
    return null;
  }
}

export async function readMembership(base: string, timeoutMs: number = TIMEOUTS.membershipMs, token?: BrokerToken): Promise<MembershipObservation | null> {
  return (await readMembershipAnswer(base, timeoutMs, token)).view;
}

/** The membership view, or why the broker refused to give it (401/403: credentials). */
export async function readMembershipAnswer(
  base: string,
  timeoutMs: number = TIMEOUTS.membershipMs,
  token?: BrokerToken,
): Promise<{ view: MembershipObservation | null; refused: { status: number; error: string } | null }> {
  try {
    const a = await call(`${base}/api/v1/system/raft/membership`, 'GET', timeoutMs, undefined, token);
    if (a.status !== 200) brokerCallFailures.inc({ call: 'membership', kind: `http_${a.status}` });
    if (a.status === 401 || a.status === 403) {
      const e = (a.json as { error?: unknown } | undefined)?.error;
      return { view: null, refused: { status: a.status, error: typeof e === 'string' ? e : clip(a.body) } };
    }
    return { view: a.status === 200 ? parseMembership(a.json) : null, refused: null };
  } catch (err) {
    brokerCallFailures.inc({ call: 'membership', kind: failureKind(err) });
    return { view: null, refused: null };
  }
}

export type ChangeResult =
  | { ok: true; membership: MembershipObservation }
  | { ok: false; code: string | null; kind: RefusalKind; status: number | null; error: string };

/** Turns a membership change answer into a result: a refusal carries the broker's code. */
export function parseChangeAnswer(status: number, json: unknown, body: string): ChangeResult {
  const j = json as { ok?: unknown; code?: unknown; error?: unknown } | undefined;
  if (j === undefined) {
    return { ok: false, code: null, kind: 'transient', status, error: `the broker answered ${status}: ${clip(body)}` };
  }
  const membership = parseMembership(json);
  if (status === 200 && j.ok !== false && membership) return { ok: true, membership };
  const code = typeof j.code === 'string' ? j.code : `http_${status}`;
  return { ok: false, code, kind: classifyRefusal(code), status, error: typeof j.error === 'string' ? j.error : clip(body) };
}

async function change(base: string, method: string, path: string, body?: unknown, timeoutMs: number = TIMEOUTS.changeMs, token?: BrokerToken): Promise<ChangeResult> {
  try {
    const a = await call(`${base}/api/v1/system/raft/membership${path}`, method, timeoutMs, body ?? (method === 'DELETE' ? undefined : {}), token);
    const r = parseChangeAnswer(a.status, a.json, a.body);
    if (!r.ok) brokerCallFailures.inc({ call: 'change', kind: r.code ?? `http_${a.status}` });
    return r;
  } catch (err) {
    brokerCallFailures.inc({ call: 'change', kind: failureKind(err) });
    return { ok: false, code: null, kind: 'transient', status: null, error: describeError(err, timeoutMs) };
  }
}

export const addLearner = (base: string, learner: { id: number; raft: string; http: string }, token?: BrokerToken) =>
  change(base, 'POST', '/learners', learner, undefined, token);
export const promote = (base: string, nodeIds: number[], token?: BrokerToken) => change(base, 'POST', '/promote', { ids: nodeIds }, undefined, token);
export const removeMember = (base: string, nodeId: number, token?: BrokerToken) => change(base, 'DELETE', `/members/${nodeId}`, undefined, undefined, token);
/** Sets the exact voter set: with a joint configuration's last set, it finishes a change left half done. */
export const setVoters = (base: string, voters: number[], token?: BrokerToken) => change(base, 'PUT', '/voters', { voters }, undefined, token);

/**
 * `storageFull`: the node refused the write at its disk gate (507 storage_full) before proposing
 * it. That says nothing about the quorum: the node's own disk is above its high mark.
 */
export type ProbeResult = { ok: true } | { ok: false; error: string; storageFull?: boolean };

/**
 * The write probe behind COMMITS: a KV put that the node answers only once it is committed by a
 * quorum and applied on that node. The key expires by itself.
 */
export async function probeWrite(base: string, via: string, timeoutMs: number = TIMEOUTS.probeMs, now = new Date(), token?: BrokerToken): Promise<ProbeResult> {
  try {
    const a = await call(`${base}/api/v1/kv/queen-operator/probe`, 'PUT', timeoutMs, { value: now.toISOString(), ttlSeconds: 600 }, token);
    if (a.status === 200 && (a.json as { applied?: unknown } | undefined)?.applied === true) return { ok: true };
    brokerCallFailures.inc({ call: 'probe', kind: `http_${a.status}` });
    const storageFull = a.status === 507 && (a.json as { code?: unknown } | undefined)?.code === 'storage_full';
    return { ok: false, error: `the write probe through ${via} answered ${a.status}: ${clip(a.body)}`, ...(storageFull ? { storageFull } : {}) };
  } catch (err) {
    brokerCallFailures.inc({ call: 'probe', kind: failureKind(err) });
    return { ok: false, error: `the write probe through ${via} got ${describeError(err, timeoutMs)}` };
  }
}

/** One request to a broker, for the clients of routes other than these (activities/link.ts). */
export { call as brokerCall, describeError as brokerCallError };
