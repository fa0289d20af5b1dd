// Raft RPC transport: JSON over HTTP/1.1 between loopback addresses, the token header, peer name
// resolution through the test bed's DNS server, and the network the test bed imposes: the
// test-only isolation switch, a node cut off the network, partitions between two peers, and the
// sources a NetworkPolicy refuses. Calls leave from the node's own address, so a receiver knows
// which pod is calling.

import * as fs from 'node:fs';
import * as http from 'node:http';
import * as dns from 'node:dns';
import { isIP } from 'node:net';
import { splitHostPort } from './config.ts';
import { NodeScope } from './scope.ts';

export interface RpcReply {
  status: number;
  json: unknown;
  headers: http.IncomingHttpHeaders;
}

export class Unreachable extends Error {}

// A request body that is already JSON text (a snapshot carries the stored state verbatim).
export class RawJson {
  text: string;
  constructor(text: string) {
    this.text = text;
  }
}

export function isLoopbackV4(ip: string): boolean {
  return isIP(ip) === 4 && ip.startsWith('127.');
}

/** What the test bed's network file says (QUEEN_SIM_NET_FILE). */
export interface NetRules {
  /** The node's machine is off the network: nothing in or out. */
  cutOff?: boolean;
  /** Addresses this node cannot exchange anything with, either way (a partition). */
  partition?: string[];
  /** Sources refused per listening port ("*": every port), as a NetworkPolicy refuses them. */
  refuse?: Record<string, string[]>;
}

export function normalizeIp(ip: string | undefined): string {
  if (!ip) return '';
  return ip.startsWith('::ffff:') ? ip.slice(7) : ip;
}

export class Net {
  token: string | null;
  isolated = false;
  /** The address calls leave from (the pod's). */
  localIp: string | null = null;
  /** Partitions set through /_sim/partition (test harness). */
  partitioned = new Set<string>();
  /** Rules from the test bed's network file. */
  rules: NetRules = {};
  private rulesMtime = -1;
  onRulesChanged: (r: NetRules) => void = () => {};
  private agent = new http.Agent({ keepAlive: true, maxSockets: 16, keepAliveMsecs: 1000 });
  private resolver: dns.promises.Resolver | null = null;
  private cache = new Map<string, { ip: string | null; until: number }>();
  private refusedLogged = new Map<string, number>();
  onTokenRefused: (addr: string) => void = () => {};
  /** The node's scope: once it ends, no call goes out and none in flight is answered. */
  readonly scope: NodeScope;
  private requests = new Set<http.ClientRequest>();

  constructor(token: string | null, dnsServer: string | null, scope: NodeScope = new NodeScope()) {
    this.token = token;
    this.scope = scope;
    if (dnsServer) {
      this.resolver = new dns.promises.Resolver({ timeout: 500, tries: 1 });
      this.resolver.setServers([dnsServer]);
    }
    // A killed node's calls are cut: the requests in flight destroyed (their promises abandoned),
    // its connections closed, its name lookups cancelled.
    scope.onKill(() => {
      for (const r of this.requests) r.destroy();
      this.requests.clear();
      this.agent.destroy();
      this.resolver?.cancel();
    });
  }

  // Resolves a peer host name; an unresolvable peer is simply unreachable (null). An answer is
  // kept for its TTL (at least a second), a failure for a second, and a name is resolved again
  // at once after a connection failure.
  async resolve(host: string): Promise<string | null> {
    if (isIP(host)) return host;
    const now = Date.now();
    const hit = this.cache.get(host);
    if (hit && now < hit.until) return hit.ip;
    let ip: string | null = null;
    let keepMs = 1000;
    try {
      if (this.resolver) {
        const addrs = await this.scope.guard(this.resolver.resolve4(host, { ttl: true }));
        ip = addrs[0]?.address ?? null;
        if (addrs[0]) keepMs = Math.max(1000, addrs[0].ttl * 1000);
      } else {
        const r = await this.scope.guard(dns.promises.lookup(host, { family: 4 }));
        ip = r.address;
      }
    } catch {
      ip = null;
    }
    this.cache.set(host, { ip, until: now + (ip === null ? 1000 : keepMs) });
    return ip;
  }

  forget(host: string): void {
    this.cache.delete(host);
  }

  /** Traffic with this address is lost (a partition, or the node cut off). */
  private lost(ip: string): boolean {
    return this.rules.cutOff === true || this.partitioned.has(ip) || (this.rules.partition ?? []).includes(ip);
  }

  /** Whether a request from `remote` to this node's `port` goes unanswered (dropped on the way). */
  refuses(remote: string | undefined, port: number): boolean {
    const ip = normalizeIp(remote);
    if (this.lost(ip)) return true;
    const r = this.rules.refuse;
    if (!r) return false;
    return (r['*'] ?? []).includes(ip) || (r[String(port)] ?? []).includes(ip);
  }

  /** Re-reads the network file when it changed; a missing file means no rules. */
  loadRules(file: string): void {
    let mtime = 0;
    try {
      mtime = fs.statSync(file).mtimeMs;
    } catch {
      mtime = 0;
    }
    if (mtime === this.rulesMtime) return;
    this.rulesMtime = mtime;
    let next: NetRules = {};
    if (mtime !== 0) {
      try {
        next = JSON.parse(fs.readFileSync(file, 'utf8')) as NetRules;
      } catch {
        this.rulesMtime = -1; // half written: read it again next time
        return;
      }
    }
    const changed = JSON.stringify(next) !== JSON.stringify(this.rules);
    this.rules = next;
    if (changed) this.onRulesChanged(next);
  }

  async call(addr: string, route: string, body: unknown, timeoutMs: number, extraHeaders: Record<string, string> = {}): Promise<RpcReply> {
    const scope = this.scope;
    if (scope.dead) return await scope.never<RpcReply>();
    if (this.isolated) throw new Unreachable('isolated');
    const { host, port } = splitHostPort(addr);
    const ip = await this.resolve(host);
    if (ip === null) throw new Unreachable(`cannot resolve ${host}`);
    // The simulator only ever talks to loopback addresses.
    if (!isLoopbackV4(ip)) throw new Unreachable(`${host} resolves to ${ip}, not a loopback address`);
    if (this.lost(ip)) {
      // Lost on the way: nothing comes back before the caller gives up.
      await scope.sleep(timeoutMs);
      throw new Unreachable(`no answer from ${ip} (partitioned)`);
    }
    const payload = body instanceof RawJson ? body.text : JSON.stringify(body ?? {});
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(payload)),
      ...extraHeaders,
    };
    if (this.token !== null) headers['x-queen-raft-token'] = this.token;
    if (scope.dead) return await scope.never<RpcReply>();
    return await new Promise<RpcReply>((resolve, reject) => {
      let done = false;
      const fail = (err: Error) => {
        this.requests.delete(req);
        // A killed node's call is abandoned: never answered, never failed.
        if (done || scope.dead) return;
        done = true;
        scope.clear(timer);
        this.forget(host);
        reject(new Unreachable(err.message));
      };
      const req = http.request({ host: ip, port, method: 'POST', path: route, headers, agent: this.agent, ...(this.localIp ? { localAddress: this.localIp } : {}) }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', fail);
        res.on('end', () => {
          this.requests.delete(req);
          if (done || scope.dead) return;
          done = true;
          scope.clear(timer);
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown = null;
          try {
            json = text === '' ? null : JSON.parse(text);
          } catch {
            json = { raw: text };
          }
          if (res.statusCode === 401) {
            const last = this.refusedLogged.get(addr) ?? 0;
            if (Date.now() - last > 5000) {
              this.refusedLogged.set(addr, Date.now());
              this.onTokenRefused(addr);
            }
          }
          resolve({ status: res.statusCode ?? 0, json, headers: res.headers });
        });
      });
      this.requests.add(req);
      const timer = scope.setTimeout(() => {
        req.destroy(new Error(`timeout after ${timeoutMs} ms`));
      }, timeoutMs);
      req.on('error', fail);
      req.on('close', () => this.requests.delete(req));
      req.end(payload);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** A request dropped by the network: never answered; the connection goes quiet and is closed much later. */
export function dropRequest(req: http.IncomingMessage, scope: NodeScope): void {
  const sock = req.socket;
  sock.pause();
  scope.setTimeout(() => sock.destroy(), 120_000)?.unref();
}

export function readBody(req: http.IncomingMessage, limit = 64 * 1024 * 1024): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > limit) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(data)), ...headers });
  res.end(data);
}
