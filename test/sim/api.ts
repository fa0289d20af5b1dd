// The two listeners of a node: the client HTTP port (health, metrics, membership API, KV write
// probe, a minimal queue, node diagnostics, the test-only /_sim/ routes) and the Raft RPC port.

import * as http from 'node:http';
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Logger, SimConfig } from './config.ts';
import { dropRequest, readBody, sendJson, type Net } from './net.ts';
import { retry503, type Answer, type ChangeOp, type RaftNode } from './raft.ts';
import type { Command, PushItem } from './types.ts';
import { allVoters } from './types.ts';

export interface SimHooks {
  crash(code: number): void;
  /** What /_sim/info reports as `pid`: the process id, or a fleet node's id. */
  pid: number;
}

function bad(error: string): Answer {
  return { status: 400, body: { ok: false, code: 'bad_request', error } };
}

function kvBad(reason: string, message: string): Answer {
  return { status: 400, body: { error: 'kv_bad_request', reason, message } };
}

function parseTimeout(url: URL): number {
  const raw = url.searchParams.get('timeoutMs');
  if (raw === null || raw === '') return 30_000;
  const n = Number(raw);
  if (!Number.isFinite(n)) return 30_000;
  return Math.min(120_000, Math.max(1, Math.floor(n)));
}

function parseJsonBody(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  if (text.trim() === '') return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: `body: ${(e as Error).message}` };
  }
}

/**
 * JWT_ENABLED: a bearer token signed with JWT_SECRET (HS256), not expired, whose `role` (or one of
 * its `roles`) is Admin. Returns why it is refused, or null.
 */
export function jwtRefusal(header: string | undefined, secret: string, now = Date.now()): { status: 401 | 403; error: string } | null {
  const m = /^Bearer\s+(\S+)$/i.exec(header ?? '');
  if (!m) return { status: 401, error: 'this route needs a bearer token with the Admin role (JWT_ENABLED=true)' };
  const parts = m[1]!.split('.');
  if (parts.length !== 3) return { status: 401, error: 'the bearer token is not a JWT' };
  const [h, p, sig] = parts as [string, string, string];
  let head: { alg?: string };
  let claims: { exp?: number; nbf?: number; role?: unknown; roles?: unknown };
  try {
    head = JSON.parse(Buffer.from(h, 'base64url').toString('utf8'));
    claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
  } catch {
    return { status: 401, error: 'the bearer token is not a JWT' };
  }
  if (head.alg !== 'HS256') return { status: 401, error: `the token's algorithm ${String(head.alg)} is not accepted (HS256)` };
  const want = createHmac('sha256', secret).update(`${h}.${p}`).digest();
  const got = Buffer.from(sig, 'base64url');
  if (got.length !== want.length || !timingSafeEqual(got, want)) return { status: 401, error: 'the token\'s signature is not valid' };
  if (typeof claims.exp === 'number' && claims.exp * 1000 <= now) return { status: 401, error: 'the token has expired' };
  if (typeof claims.nbf === 'number' && claims.nbf * 1000 > now) return { status: 401, error: 'the token is not valid yet' };
  const roles = [claims.role, ...(Array.isArray(claims.roles) ? claims.roles : [])].filter((r): r is string => typeof r === 'string');
  if (!roles.some((r) => r.toLowerCase() === 'admin')) return { status: 403, error: 'this route needs the Admin role' };
  return null;
}

function asId(v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null;
}

export class ClientApi {
  node: RaftNode;
  cfg: SimConfig;
  logger: Logger;
  hooks: SimHooks;
  server: http.Server;
  inflight = 0;
  private drainWaiters: (() => void)[] = [];

  constructor(node: RaftNode, cfg: SimConfig, logger: Logger, hooks: SimHooks) {
    this.node = node;
    this.cfg = cfg;
    this.logger = logger;
    this.hooks = hooks;
    this.server = http.createServer((req, res) => {
      // A request the network drops (a node cut off, a partition, a NetworkPolicy) is never answered.
      if (this.node.t.dead) {
        req.socket.destroy();
        return;
      }
      if (this.node.net.refuses(req.socket.remoteAddress, this.cfg.httpPort)) {
        dropRequest(req, this.node.t);
        return;
      }
      this.inflight++;
      let counted = true;
      const done = () => {
        if (!counted) return;
        counted = false;
        this.inflight--;
        if (this.inflight === 0) for (const w of this.drainWaiters.splice(0)) w();
      };
      res.on('finish', done);
      res.on('close', done);
      this.handle(req, res).catch((e: unknown) => {
        this.logger.error('request failed', { url: req.url, error: String(e) });
        sendJson(res, 500, { error: String(e), code: 'internal' });
      });
    });
    // Node's default: a client that honours the Keep-Alive hint (undici keeps 2 s of margin below
    // it) reuses its connections. At 2 s the hint left undici no margin: it closed the connection
    // after every response, and each push paid for a new one on both sides.
    this.server.keepAliveTimeout = 5000;
  }

  // Stop accepting, let the requests in flight finish (bounded), then close what is left.
  async drain(maxMs: number): Promise<void> {
    this.server.close();
    this.server.closeIdleConnections();
    if (this.inflight > 0) {
      const scope = this.node.t;
      await scope.guard(
        new Promise<void>((resolve) => {
          const t = scope.setTimeout(resolve, maxMs);
          this.drainWaiters.push(() => {
            scope.clear(t);
            resolve();
          });
        }),
      );
    }
    this.server.closeAllConnections();
  }

  private send(res: http.ServerResponse, a: Answer): void {
    sendJson(res, a.status, a.body, a.headers ?? {});
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sim');
    const p = url.pathname;
    const method = req.method ?? 'GET';
    const node = this.node;

    if (p === '/health' && method === 'GET') {
      const h = node.health();
      sendJson(res, h.ready ? 200 : 503, h.body);
      return;
    }
    if (p === '/metrics' && method === 'GET') {
      const h = node.health().body.raft as Record<string, unknown>;
      sendJson(res, 200, {
        engine: 'raft',
        version: this.cfg.version,
        raft: {
          role: h.role,
          leader: h.leader,
          term: h.term,
          applied: h.applied,
          commit: h.commit,
          lag: h.lag,
          quorumAckMs: h.quorumAckMs,
          storageReady: h.storageReady,
        },
        disk: { usedBytes: node.store.usage(), volumeBytes: this.cfg.volumeBytes, gateClosed: node.gateClosed },
      });
      return;
    }
    if (p === '/metrics/prometheus' && method === 'GET') {
      const lines = [
        `queen_raft_index{kind="log"} ${node.store.lastIndex()}`,
        `queen_raft_index{kind="committed"} ${node.commitIndex}`,
        `queen_raft_index{kind="applied"} ${node.sm.applied}`,
        `queen_raft_index{kind="durable"} ${node.store.lastIndex()}`,
        `queen_raft_term ${node.term}`,
        `queen_raft_is_leader ${node.state === 'leader' ? 1 : 0}`,
        `queen_raft_storage_full ${node.stopped?.reason === 'disk_full' || node.gateClosed ? 1 : 0}`,
        `queen_raft_stopped ${node.isStopped() ? 1 : 0}`,
        ...(node.link?.prometheus() ?? []),
      ];
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(lines.join('\n') + '\n');
      return;
    }

    if (p.startsWith('/api/v1/system/') && this.cfg.jwtEnabled) {
      const refused = jwtRefusal(req.headers.authorization, this.cfg.jwtSecret!);
      if (refused) {
        sendJson(res, refused.status, { error: refused.error, code: refused.status === 401 ? 'unauthorized' : 'forbidden' });
        return;
      }
    }
    if (p.startsWith('/api/v1/system/raft/membership')) {
      await this.membership(req, res, url, method);
      return;
    }
    if (p === '/api/v1/system/link' && method === 'GET') {
      sendJson(res, 200, node.link?.status() ?? { role: 'primary', leader: node.state === 'leader' });
      return;
    }
    if (p === '/api/v1/system/link/promote' && method === 'POST') {
      this.send(res, node.link ? await node.link.promote() : { status: 409, body: { code: 'not_standby', error: 'this cluster is not a standby' } });
      return;
    }
    if (p.startsWith('/api/v1/kv/')) {
      await this.kv(req, res, url, method);
      return;
    }
    if (p === '/api/v1/push' && method === 'POST') {
      await this.push(req, res);
      return;
    }
    if (p.startsWith('/api/v1/pop/queue/') && method === 'GET') {
      await this.pop(res, url);
      return;
    }
    if (p === '/api/v1/raft/status' && method === 'GET') {
      sendJson(res, 200, {
        nodeId: node.self,
        role: node.role(),
        term: node.term,
        leaderId: node.isStopped() ? null : node.leaderId,
        purgedIndex: node.store.purgedIndex,
        snapshotIndex: node.store.purgedIndex,
        appliedIndex: node.sm.applied,
        commitIndex: node.commitIndex,
        lastLogIndex: node.store.lastIndex(),
        stopped: node.stopped,
      });
      return;
    }
    if (p === '/api/v1/raft/members' && method === 'GET') {
      const m = node.membership();
      sendJson(res, 200, {
        nodeId: node.self,
        clusterId: node.clusterId(),
        leaderId: node.isStopped() ? null : node.leaderId,
        term: node.term,
        voters: m ? allVoters(m.config) : [],
        learners: m ? [...m.config.learners].sort((a, b) => a - b) : [],
        joint: m?.config.joint ?? null,
        members: m ? Object.entries(m.config.nodes).map(([id, a]) => ({ nodeId: Number(id), raft: a.raft, http: a.http })) : [],
      });
      return;
    }
    if (p === '/api/v1/raft/liveness' && method === 'GET') {
      const v = (await node.getMembership(5000)).body as { membership: { members: { nodeId: number; live: boolean; lastAckMs: number | null }[] } };
      sendJson(res, 200, { nodeId: node.self, leaderId: node.leaderId, members: v.membership.members.map((m) => ({ nodeId: m.nodeId, live: m.live, lastAckMs: m.lastAckMs })) });
      return;
    }
    if (p.startsWith('/_sim/')) {
      await this.sim(req, res, url, method);
      return;
    }
    sendJson(res, 404, { error: `no route ${method} ${p}`, code: 'not_found' });
  }

  // ---- membership --------------------------------------------------------------------------

  private async membership(req: http.IncomingMessage, res: http.ServerResponse, url: URL, method: string): Promise<void> {
    const tenancy = this.cfg.tenancyHeader;
    const tenant = req.headers['x-queen-tenant'];
    if (tenancy !== '' && tenancy !== 'off' && tenancy !== 'false' && typeof tenant === 'string' && tenant !== '' && tenant !== 'default') {
      this.send(res, { status: 403, body: { ok: false, code: 'forbidden', error: 'the raft membership is cell-wide: use the default tenant' } });
      return;
    }
    const rest = url.pathname.slice('/api/v1/system/raft/membership'.length);
    const timeoutMs = parseTimeout(url);
    const forceQ = ['true', '1'].includes(url.searchParams.get('force') ?? '');
    if (rest === '' || rest === '/') {
      if (method !== 'GET') {
        sendJson(res, 405, { error: 'method not allowed', code: 'bad_request' });
        return;
      }
      if (this.node.singleNode()) {
        this.send(res, { status: 200, body: { engine: 'raft', membership: this.node.state === 'leader' ? this.node.leaderMembershipView() : this.node.ownMembershipView() } });
        return;
      }
      this.send(res, await this.node.getMembership(Math.min(timeoutMs, 5000)));
      return;
    }
    const del = /^\/members\/([^/]+)$/.exec(rest);
    let op: ChangeOp;
    if (del && method === 'DELETE') {
      const raw = decodeURIComponent(del[1]!);
      if (!/^[0-9]+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
        this.send(res, bad(`\`${raw}\` is not a node id`));
        return;
      }
      op = { op: 'remove', id: Number(raw) };
    } else {
      const text = await readBody(req);
      const parsed = parseJsonBody(text);
      if (!parsed.ok) {
        this.send(res, bad(parsed.error));
        return;
      }
      const b = (parsed.value ?? {}) as Record<string, unknown>;
      if (typeof b !== 'object' || Array.isArray(b)) {
        this.send(res, bad('body: expected a JSON object'));
        return;
      }
      const force = forceQ || b.force === true;
      if (rest === '/learners' && method === 'POST') {
        const id = asId(b.id ?? b.nodeId);
        if (id === null) return this.send(res, bad('missing field `id`'));
        if (typeof b.raft !== 'string') return this.send(res, bad('missing field `raft`'));
        if (typeof b.http !== 'string') return this.send(res, bad('missing field `http`'));
        op = { op: 'learner', id, raft: b.raft, http: b.http };
      } else if (rest === '/promote' && method === 'POST') {
        let ids: number[] | null = null;
        if (Array.isArray(b.ids)) ids = b.ids.map(asId).filter((x): x is number => x !== null);
        else if (b.id !== undefined && asId(b.id) !== null) ids = [asId(b.id)!];
        if (ids === null || ids.length === 0) return this.send(res, bad('`ids` must name at least one node'));
        op = { op: 'promote', ids, force };
      } else if (rest === '/voters' && method === 'PUT') {
        let voters: number[] | null = null;
        if (Array.isArray(b.voters)) voters = b.voters.map(asId).filter((x): x is number => x !== null);
        else if (b.voter !== undefined && asId(b.voter) !== null) voters = [asId(b.voter)!];
        if (voters === null) return this.send(res, bad('missing field `voters`'));
        op = { op: 'voters', voters, force };
      } else {
        sendJson(res, 404, { error: `no route ${method} ${url.pathname}`, code: 'not_found' });
        return;
      }
    }
    this.send(res, await this.node.change(op, timeoutMs));
  }

  // ---- KV write probe ------------------------------------------------------------------

  private gateAnswer(): Answer | null {
    if (this.node.gateClosed) {
      return { status: 507, body: { error: 'storage is full on at least one node', code: 'storage_full' } };
    }
    return null;
  }

  private async kv(req: http.IncomingMessage, res: http.ServerResponse, url: URL, method: string): Promise<void> {
    const rest = url.pathname.slice('/api/v1/kv/'.length);
    const slash = rest.indexOf('/');
    if (slash <= 0 || slash === rest.length - 1) {
      this.send(res, kvBad('kv_bad_path', 'expected /api/v1/kv/{ns}/{key}'));
      return;
    }
    const ns = decodeURIComponent(rest.slice(0, slash));
    const key = decodeURIComponent(rest.slice(slash + 1));
    if (method === 'GET') {
      // A linearizable read: the leader's ReadIndex (a quorum round), applied on this node.
      if (!(await this.node.linearizableRead(performance.now() + this.cfg.stmtTimeoutMs))) {
        sendJson(res, 503, { error: 'no read point: the leader cannot confirm its majority, or none is known; retry', code: 'retry' }, { 'retry-after': '1' });
        return;
      }
      const cur = this.node.sm.kv[`${ns}/${key}`];
      if (!cur || (cur.expiresAt !== null && cur.expiresAt <= Date.now())) {
        sendJson(res, 200, { found: false });
        return;
      }
      sendJson(res, 200, { found: true, key, value: cur.value, version: cur.version }, { etag: `"${cur.version}"` });
      return;
    }
    if (method !== 'PUT') {
      sendJson(res, 405, { error: 'method not allowed', code: 'bad_request' });
      return;
    }
    if (url.search !== '') {
      this.send(res, kvBad('kv_no_query_string', 'the KV routes take no query string'));
      return;
    }
    const text = await readBody(req);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      this.send(res, kvBad('kv_bad_json', 'the body must be a JSON object'));
      return;
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      this.send(res, kvBad('kv_bad_json', 'the body must be a JSON object'));
      return;
    }
    const b = body as Record<string, unknown>;
    for (const f of ['op', 'ns', 'namespace', 'key']) {
      if (f in b) {
        this.send(res, kvBad('kv_field_in_path', `\`${f}\` belongs in the path, not the body`));
        return;
      }
    }
    if (!('value' in b)) {
      this.send(res, kvBad('kv_value_missing', 'the body needs `value`'));
      return;
    }
    const hasTtl = b.ttlSeconds !== undefined && b.ttlSeconds !== null;
    const hasForever = b.forever === true;
    if (!hasTtl && !hasForever) {
      this.send(res, kvBad('kv_expiry_not_specified', 'give exactly one of `ttlSeconds` or `forever: true`'));
      return;
    }
    if (hasTtl && hasForever) {
      this.send(res, kvBad('kv_expiry_conflict', 'give exactly one of `ttlSeconds` or `forever: true`'));
      return;
    }
    if (hasTtl && !(typeof b.ttlSeconds === 'number' && Number.isInteger(b.ttlSeconds) && b.ttlSeconds > 0)) {
      this.send(res, kvBad('kv_bad_ttl', '`ttlSeconds` must be an integer > 0'));
      return;
    }
    let expect: number | null = null;
    if (b.expect !== undefined && b.expect !== null) {
      if (typeof b.expect !== 'number' || !Number.isInteger(b.expect) || b.expect < 0) {
        this.send(res, kvBad('kv_bad_expect', '`expect` must be a version (0 = must not exist)'));
        return;
      }
      expect = b.expect;
    }
    if (Buffer.byteLength(JSON.stringify(b.value)) > 65536) {
      this.send(res, { status: 413, body: { error: 'kv_value_too_large', reason: 'kv_value_too_large', message: 'the value exceeds 65536 bytes' } });
      return;
    }
    const gate = this.gateAnswer();
    if (gate) {
      this.send(res, gate);
      return;
    }
    const cmd: Command = {
      t: 'kv',
      ns,
      key,
      value: b.value,
      ttlSeconds: hasTtl ? (b.ttlSeconds as number) : null,
      expect,
      required: b.required === true,
    };
    this.send(res, await this.node.execute(cmd));
  }

  // ---- queue -----------------------------------------------------------------------------

  private async push(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const text = await readBody(req);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      this.send(res, { status: 400, body: { error: 'body: not JSON', code: 'bad_request' } });
      return;
    }
    const items = (body as { items?: unknown } | null)?.items;
    if (!Array.isArray(items)) {
      this.send(res, { status: 400, body: { error: '`items` must be an array', code: 'bad_request' } });
      return;
    }
    // The broker answers a push 201 Created (server/src/handlers/data.rs handle_push), an empty one too.
    if (items.length === 0) {
      this.send(res, { status: 201, body: [] });
      return;
    }
    const out: PushItem[] = [];
    for (const raw of items as Record<string, unknown>[]) {
      if (typeof raw !== 'object' || raw === null || typeof raw.queue !== 'string' || raw.queue === '') {
        this.send(res, { status: 400, body: { error: 'every item needs a `queue`', code: 'bad_request' } });
        return;
      }
      if (raw.queue.length > 128) {
        this.send(res, { status: 413, body: { error: 'queue name too long', code: 'name_too_long' } });
        return;
      }
      out.push({
        queue: raw.queue,
        partition: typeof raw.partition === 'string' && raw.partition !== '' ? raw.partition : 'Default',
        payload: raw.payload ?? null,
        transactionId: typeof raw.transactionId === 'string' && raw.transactionId !== '' ? raw.transactionId : randomUUID(),
      });
    }
    const gate = this.gateAnswer();
    if (gate) {
      this.send(res, gate);
      return;
    }
    const a = await this.node.execute({ t: 'push', items: out });
    this.send(res, a.status === 200 ? { ...a, status: 201 } : a);
  }

  private async pop(res: http.ServerResponse, url: URL): Promise<void> {
    const queue = decodeURIComponent(url.pathname.slice('/api/v1/pop/queue/'.length));
    if (queue === '' || queue.includes('/')) {
      this.send(res, { status: 400, body: { error: 'expected /api/v1/pop/queue/{queue}', code: 'bad_request' } });
      return;
    }
    const batchRaw = Number(url.searchParams.get('batch') ?? '1');
    const batch = Number.isInteger(batchRaw) && batchRaw > 0 ? Math.min(batchRaw, 10_000) : 1;
    const partition = url.searchParams.get('partition');
    const gate = this.gateAnswer();
    if (gate) {
      this.send(res, gate);
      return;
    }
    const a = await this.node.execute({ t: 'pop', queue, partition: partition && partition !== '' ? partition : null, batch });
    if (a.status === 200) {
      const messages = a.body as unknown[];
      // Nothing to pop: 204 No Content, no body (the broker's pop).
      if (messages.length === 0) {
        res.writeHead(204);
        res.end();
        return;
      }
      this.send(res, { status: 200, body: { messages } });
      return;
    }
    this.send(res, a);
  }

  // ---- test-only -------------------------------------------------------------------------

  private async sim(req: http.IncomingMessage, res: http.ServerResponse, url: URL, method: string): Promise<void> {
    const node = this.node;
    const p = url.pathname;
    if (p === '/_sim/info' && method === 'GET') {
      sendJson(res, 200, {
        pid: this.hooks.pid,
        nodeId: node.self,
        version: this.cfg.version,
        role: node.role(),
        term: node.term,
        leader: node.isStopped() ? null : node.leaderId,
        applied: node.sm.applied,
        commit: node.commitIndex,
        dataDir: this.cfg.dataDir,
        clusterId: node.clusterId(),
        isolated: node.net.isolated,
        partitioned: [...node.net.partitioned],
        net: node.net.rules,
        storeBytes: node.store.replayBytes(),
        gateClosed: node.gateClosed,
        usedBytes: node.store.usage(),
        volumeBytes: this.cfg.volumeBytes,
        stopped: node.stopped,
      });
      return;
    }
    if (p === '/_sim/committed' && method === 'GET') {
      const q = url.searchParams.get('queue') ?? '';
      const qs = node.sm.queues[q];
      sendJson(res, 200, { queue: q, transactionIds: qs ? qs.committed : [], pending: qs ? qs.msgs.length : 0, applied: node.sm.applied });
      return;
    }
    if (method !== 'POST') {
      sendJson(res, 404, { error: `no route ${method} ${p}`, code: 'not_found' });
      return;
    }
    const parsed = parseJsonBody(await readBody(req));
    const b = (parsed.ok ? parsed.value : {}) as Record<string, unknown>;
    if (p === '/_sim/isolate') {
      node.net.isolated = b.on === true;
      this.logger.warn(node.net.isolated ? 'isolated: all raft traffic dropped (/_sim/isolate)' : 'reconnected (/_sim/isolate)');
      sendJson(res, 200, { isolated: node.net.isolated });
      return;
    }
    if (p === '/_sim/partition') {
      // Cut this node from these addresses (both ways, as seen from this node): a partition.
      const ips = Array.isArray(b.ips) ? b.ips.filter((x): x is string => typeof x === 'string') : [];
      node.net.partitioned = new Set(ips);
      this.logger.warn(ips.length ? 'partitioned from some peers (/_sim/partition)' : 'partition healed (/_sim/partition)', { ips });
      sendJson(res, 200, { partitioned: ips });
      return;
    }
    if (p === '/_sim/fill') {
      const bytes = typeof b.bytes === 'number' && b.bytes >= 0 ? Math.floor(b.bytes) : 0;
      node.store.fill(bytes);
      node.checkDisk();
      sendJson(res, 200, { fillerBytes: bytes, usedBytes: node.store.usage(), volumeBytes: this.cfg.volumeBytes, gateClosed: node.gateClosed, stopped: node.stopped });
      return;
    }
    if (p === '/_sim/crash') {
      const code = typeof b.code === 'number' ? Math.floor(b.code) : 137;
      sendJson(res, 200, { exiting: code });
      this.hooks.crash(code);
      return;
    }
    if (p === '/_sim/fault') {
      if (typeof b.crashAfterJoint === 'boolean') node.crashAfterJoint = b.crashAfterJoint;
      sendJson(res, 200, { crashAfterJoint: node.crashAfterJoint, ...(b.throw !== undefined ? { throw: b.throw } : {}) });
      // A bug of the build: an exception nothing catches, thrown from a timer or as a rejected
      // promise nobody awaits. Alone in its process the node dies of it (exit 1, the stack on
      // stderr); in a fleet, that node alone.
      if (b.throw === 'timer') node.t.setTimeout(() => {
        throw new Error('simulated bug: an exception nothing catches (/_sim/fault throw=timer)');
      }, 10);
      if (b.throw === 'rejection') node.t.setTimeout(() => {
        void Promise.reject(new Error('simulated bug: a rejection nothing handles (/_sim/fault throw=rejection)'));
      }, 10);
      return;
    }
    sendJson(res, 404, { error: `no route ${method} ${p}`, code: 'not_found' });
  }
}

// The Raft RPC listener. Every route is POST with a JSON body; with QUEEN_RAFT_TOKEN set, a
// request without the right x-queen-raft-token is refused with 401. While isolated (test-only),
// every connection is dropped without an answer.
export function createRaftServer(node: RaftNode, cfg: SimConfig, net: Net, logger: Logger): http.Server {
  const server = http.createServer((req, res) => {
    if (net.isolated || net.scope.dead) {
      req.socket.destroy();
      return;
    }
    if (net.refuses(req.socket.remoteAddress, cfg.raftPort)) {
      dropRequest(req, net.scope);
      return;
    }
    const route = (req.url ?? '').split('?')[0] ?? '';
    // The cluster link's routes take the link token, not the raft token (link.ts).
    if (route.startsWith('/link/')) {
      if (node.link) node.link.serveRaftPort(route, req, res);
      else sendJson(res, 404, { error: 'this node serves no link: QUEEN_LINK_TOKEN is not set' });
      return;
    }
    if (cfg.token !== null && req.headers['x-queen-raft-token'] !== cfg.token) {
      sendJson(res, 401, { error: 'missing or wrong x-queen-raft-token' });
      return;
    }
    net.scope
      .guard(readBody(req))
      .then(async (text) => {
        if (net.isolated) {
          req.socket.destroy();
          return;
        }
        let body: Record<string, unknown> = {};
        try {
          body = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
        } catch {
          sendJson(res, 400, { error: 'bad json' });
          return;
        }
        switch (route) {
          case '/raft/v1/state':
            sendJson(res, 200, node.stateInfo());
            return;
          case '/raft/v1/append': {
            const h = req.headers['x-queen-raft-members'];
            const r = node.handleAppend(body as never, typeof h === 'string' ? h : undefined);
            sendJson(res, r.status, r.body);
            return;
          }
          case '/raft/v1/vote':
            sendJson(res, 200, node.handleVote(body as never));
            return;
          case '/raft/v1/prevote':
            sendJson(res, 200, node.handlePreVote(body as never));
            return;
          case '/raft/v1/transfer':
            sendJson(res, 200, node.handleTransfer(body as never));
            return;
          case '/raft/v1/leaving':
            node.handleLeaving(body as never);
            sendJson(res, 200, { ok: true });
            return;
          case '/raft/v1/snapshot': {
            const r = node.handleSnapshot(body as never);
            sendJson(res, r.status, r.body);
            return;
          }
          case '/raft/v1/read_index': {
            // ReadIndex needs a quorum round: a leader cut off from its majority cannot answer.
            const commit = node.state === 'leader' ? await node.readIndex(450) : null;
            if (commit !== null) sendJson(res, 200, { commit, term: node.term });
            else sendJson(res, 503, { error: node.state === 'leader' ? 'no quorum for the read' : 'not the leader', leader: node.leaderId });
            return;
          }
          case '/raft/v1/members':
            if (node.state === 'leader' && !node.isStopped() && node.initialized()) sendJson(res, 200, { engine: 'raft', membership: node.leaderMembershipView() });
            else sendJson(res, 503, { error: 'not the leader', leader: node.leaderId });
            return;
          case '/raft/v1/membership':
            sendJson(res, 200, await node.handleForwardedChange(body as never));
            return;
          case '/raft/v1/submit':
            sendJson(res, 200, await node.handleSubmit(body as never));
            return;
          default:
            sendJson(res, 404, { error: `no raft route ${route}` });
        }
      })
      .catch((e: unknown) => {
        logger.error('raft rpc failed', { route, error: String(e) });
        sendJson(res, 500, { error: String(e) });
      });
  });
  server.keepAliveTimeout = 5000;
  return server;
}

export { retry503 };
