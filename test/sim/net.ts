// Raft RPC transport: JSON over HTTP/1.1 between loopback addresses, the token header, peer name
// resolution through the test bed's DNS server, and the test-only isolation switch.

import * as http from 'node:http';
import * as dns from 'node:dns';
import { isIP } from 'node:net';
import { splitHostPort } from './config.ts';

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

export class Net {
  token: string | null;
  isolated = false;
  private agent = new http.Agent({ keepAlive: true, maxSockets: 16, keepAliveMsecs: 1000 });
  private resolver: dns.promises.Resolver | null = null;
  private cache = new Map<string, { ip: string | null; at: number }>();
  private refusedLogged = new Map<string, number>();
  onTokenRefused: (addr: string) => void = () => {};

  constructor(token: string | null, dnsServer: string | null) {
    this.token = token;
    if (dnsServer) {
      this.resolver = new dns.promises.Resolver({ timeout: 500, tries: 1 });
      this.resolver.setServers([dnsServer]);
    }
  }

  // Resolves a peer host name; an unresolvable peer is simply unreachable (null). Names are
  // re-resolved at most every second, and at once after a connection failure.
  async resolve(host: string): Promise<string | null> {
    if (isIP(host)) return host;
    const now = Date.now();
    const hit = this.cache.get(host);
    if (hit && now - hit.at < 1000) return hit.ip;
    let ip: string | null = null;
    try {
      if (this.resolver) {
        const addrs = await this.resolver.resolve4(host);
        ip = addrs[0] ?? null;
      } else {
        const r = await dns.promises.lookup(host, { family: 4 });
        ip = r.address;
      }
    } catch {
      ip = null;
    }
    this.cache.set(host, { ip, at: now });
    return ip;
  }

  forget(host: string): void {
    this.cache.delete(host);
  }

  async call(addr: string, route: string, body: unknown, timeoutMs: number, extraHeaders: Record<string, string> = {}): Promise<RpcReply> {
    if (this.isolated) throw new Unreachable('isolated');
    const { host, port } = splitHostPort(addr);
    const ip = await this.resolve(host);
    if (ip === null) throw new Unreachable(`cannot resolve ${host}`);
    // The simulator only ever talks to loopback addresses.
    if (!isLoopbackV4(ip)) throw new Unreachable(`${host} resolves to ${ip}, not a loopback address`);
    const payload = body instanceof RawJson ? body.text : JSON.stringify(body ?? {});
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(payload)),
      ...extraHeaders,
    };
    if (this.token !== null) headers['x-queen-raft-token'] = this.token;
    return await new Promise<RpcReply>((resolve, reject) => {
      let done = false;
      const fail = (err: Error) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.forget(host);
        reject(new Unreachable(err.message));
      };
      const req = http.request({ host: ip, port, method: 'POST', path: route, headers, agent: this.agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', fail);
        res.on('end', () => {
          if (done) return;
          done = true;
          clearTimeout(timer);
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
      const timer = setTimeout(() => {
        req.destroy(new Error(`timeout after ${timeoutMs} ms`));
      }, timeoutMs);
      req.on('error', fail);
      req.end(payload);
    });
  }

  close(): void {
    this.agent.destroy();
  }
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
