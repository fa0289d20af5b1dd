// Test harness for the Queen node simulator: starts simulated nodes on distinct loopback addresses
// of one random 127.X.Y.0/24 that a lock file keeps for it (so parallel test files never clash),
// peers as literal IPs, data dirs in a temp folder, fast timings. Restarts a node on the same data
// dir (optionally wiped), sends SIGTERM/SIGKILL, reads exit codes. Every node is killed at the end,
// and when the test process exits for any reason.
//
// QUEEN_SIM_MODE picks how nodes run: `process` (default), one OS process per node (main.ts), or
// `fleet`, every node of the test process in one fleet process (fleet.ts), as a test bed with
// QUEEN_TESTBED_SIM_FLEET runs them. The scenarios are the same in both modes.

import { spawn, type ChildProcess } from 'node:child_process';
import * as dgram from 'node:dgram';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { holdPidFile } from '../testbed/pid-file.ts';
import { FLEET_MAIN, SimFleet, type FleetNode } from './fleet-client.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(here, '..', '..');
export const SIM_MAIN = path.join(here, 'main.ts');

// Node.js 24 from the `node` devDependency (the machine's own node is older).
export function node24(): string {
  const bin = path.join(REPO_ROOT, 'node_modules', 'node', 'bin', 'node');
  if (fs.existsSync(bin)) return bin;
  const major = Number(process.versions.node.split('.')[0]);
  if (major >= 24) return process.execPath;
  throw new Error('Node.js 24 not found: run npm install (the `node` devDependency)');
}

/** How the nodes run: `process` (one OS process each) or `fleet` (all in one fleet process). */
export const SIM_MODE: 'process' | 'fleet' = process.env.QUEEN_SIM_MODE === 'fleet' ? 'fleet' : 'process';

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

// fleet mode: one fleet process for the test process, started with its first node.
let sharedFleet: SimFleet | null = null;
export function simFleet(): SimFleet {
  installExitHook();
  if (sharedFleet && !sharedFleet.dead) return sharedFleet;
  sharedFleet = new SimFleet((extra) => {
    const child = spawn(node24(), [FLEET_MAIN], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', QUEEN_SIM_EXIT_WITH_PARENT: String(process.pid), ...extra },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    live.add(child);
    const exited = new Promise<void>((r) => child.on('exit', () => {
      live.delete(child);
      r();
    }));
    return { pid: child.pid ?? -1, kill: () => child.kill('SIGKILL'), exited };
  });
  return sharedFleet;
}
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const c of live) {
      try {
        c.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

// Fast timings for tests: heartbeat 50 ms, election 300-600 ms (liveness window 1 s), readiness
// quorum 2 s, statement timeout 2 s, boot waits and drains x0.1.
export const FAST_ENV: Record<string, string> = {
  QUEEN_RAFT_HEARTBEAT_MS: '50',
  QUEEN_RAFT_ELECTION_MS: '300',
  QUEEN_RAFT_READY_QUORUM_MS: '2000',
  QUEEN_STMT_TIMEOUT_MS: '2000',
  QUEEN_SIM_TIME_FACTOR: '0.1',
  QUEEN_RAFT_DISK_CHECK_MS: '50',
  ...realisticEnv(),
};

/**
 * QUEEN_SIM_TEST_DATA=realistic runs every simulator test with data that takes time (entries of
 * 2 KB, a 20 MB/s link to each follower, a boot that replays 50 MB/s, at the time factor 0.1):
 * the scenarios must hold with those knobs as they hold without them.
 */
export function realisticEnv(): Record<string, string> {
  if (process.env.QUEEN_SIM_TEST_DATA !== 'realistic') return {};
  return { QUEEN_SIM_ENTRY_BYTES: '2k', QUEEN_SIM_BANDWIDTH: '20M', QUEEN_SIM_REPLAY_RATE: '50M' };
}

export interface HttpResult {
  status: number;
  json: any;
  headers: Headers;
}

export type TryResult = HttpResult | { error: string };

export function isError(r: TryResult): r is { error: string } {
  return (r as { error?: string }).error !== undefined;
}

export class SimProc {
  id: number;
  /** The OS process (process mode). */
  child: ChildProcess | null;
  /** The node in the fleet process (fleet mode). */
  fleetNode: FleetNode | null;
  /** Its pid, or its pid-like id in the fleet: what /_sim/info reports. */
  pid: number;
  exitCode: number | null = null;
  signal: NodeJS.Signals | null = null;
  exited: Promise<number>;
  lines: string[] = [];

  constructor(id: number, target: ChildProcess | FleetNode) {
    this.id = id;
    const isChild = 'stdout' in target;
    this.child = isChild ? target : null;
    this.fleetNode = isChild ? null : target;
    this.pid = isChild ? (target.pid ?? -1) : target.id;
    const onLine = (line: string) => {
      this.lines.push(line);
      if (this.lines.length > 5000) this.lines.splice(0, 1000);
    };
    const ended = (code: number | null, signal: NodeJS.Signals | null): number => {
      this.exitCode = code ?? (signal === 'SIGKILL' ? 137 : signal === 'SIGTERM' ? 143 : 128);
      this.signal = signal;
      return this.exitCode;
    };
    if (isChild) {
      const child = target;
      let buf = '';
      const onData = (d: Buffer) => {
        buf += d.toString('utf8');
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          onLine(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      this.exited = new Promise((resolve) => {
        child.on('exit', (code, signal) => {
          live.delete(child);
          resolve(ended(code, signal));
        });
      });
    } else {
      target.onLine = onLine;
      this.exited = target.exited.then((e) => ended(e.code, e.signal));
    }
  }

  get running(): boolean {
    return this.exitCode === null;
  }

  /** Sends a signal to the node (its process, or its part of the fleet). */
  kill(signal: NodeJS.Signals): void {
    if (this.child) this.child.kill(signal);
    else this.fleetNode?.signal(signal);
  }

  logs(): { level?: string; msg?: string; [k: string]: unknown }[] {
    const out: { level?: string; msg?: string }[] = [];
    for (const l of this.lines) {
      try {
        out.push(JSON.parse(l) as { level?: string; msg?: string });
      } catch {
        out.push({ msg: l });
      }
    }
    return out;
  }

  hasLog(re: RegExp): boolean {
    return this.lines.some((l) => re.test(l));
  }
}

export interface StartOptions {
  env?: Record<string, string>; // extra env for this start (merged over the cluster env)
  ip?: string; // loopback address for this start (a recreated pod may get another one)
  wipe?: boolean; // empty the data dir first
  join?: boolean; // QUEEN_RAFT_JOIN=true
}

export interface ClusterOptions {
  size?: number; // founders, ids 1..size (default 3)
  env?: Record<string, string>; // env for every node, over FAST_ENV
  token?: string | null; // QUEEN_RAFT_TOKEN (default: a random one)
  dns?: boolean; // peers by pod FQDN, resolved through a DNS server the cluster runs (QUEEN_SIM_DNS)
  mode?: 'process' | 'fleet'; // how its nodes run (default: QUEEN_SIM_MODE)
}

// A minimal DNS server (UDP, A records only) standing in for the cluster DNS.
export class MiniDns {
  records = new Map<string, string>();
  /** The TTL of its answers, in seconds (the test bed's DNS: 5 × its time factor, at least 1). */
  ttl = 0;
  private sock: dgram.Socket | null = null;
  address = '';

  async start(ip: string, port: number): Promise<void> {
    const sock = dgram.createSocket('udp4');
    this.sock = sock;
    sock.on('message', (msg, rinfo) => {
      const reply = this.answer(msg);
      if (reply) sock.send(reply, rinfo.port, rinfo.address);
    });
    await new Promise<void>((resolve, reject) => {
      sock.once('error', reject);
      sock.bind(port, ip, () => resolve());
    });
    this.address = `${ip}:${port}`;
  }

  set(name: string, ip: string): void {
    this.records.set(name.toLowerCase(), ip);
  }

  delete(name: string): void {
    this.records.delete(name.toLowerCase());
  }

  private answer(q: Buffer): Buffer | null {
    if (q.length < 17) return null;
    let off = 12;
    const labels: string[] = [];
    while (off < q.length && q[off] !== 0) {
      const len = q[off]!;
      labels.push(q.subarray(off + 1, off + 1 + len).toString('ascii'));
      off += 1 + len;
    }
    off += 1;
    const qtype = q.readUInt16BE(off);
    const qEnd = off + 4;
    const name = labels.join('.').toLowerCase();
    const ip = this.records.get(name);
    const header = Buffer.alloc(12);
    q.copy(header, 0, 0, 2);
    const found = ip !== undefined;
    header.writeUInt16BE(found ? 0x8180 : 0x8183, 2); // NOERROR / NXDOMAIN
    header.writeUInt16BE(1, 4);
    const withAnswer = found && qtype === 1;
    header.writeUInt16BE(withAnswer ? 1 : 0, 6);
    const question = q.subarray(12, qEnd);
    if (!withAnswer) return Buffer.concat([header, question]);
    const ans = Buffer.alloc(16);
    ans.writeUInt16BE(0xc00c, 0);
    ans.writeUInt16BE(1, 2);
    ans.writeUInt16BE(1, 4);
    ans.writeUInt32BE(this.ttl, 6);
    ans.writeUInt16BE(4, 10);
    ip.split('.').forEach((b, i) => ans.writeUInt8(Number(b), 12 + i));
    return Buffer.concat([header, question, ans]);
  }

  close(): void {
    this.sock?.close();
    this.sock = null;
  }
}

/** Where the simulated clusters of this machine's test processes hold their subnets. */
const SUBNET_LOCKS = path.join(os.tmpdir(), 'queen-sim-subnets');
/** The releases of the subnets this process holds. */
const heldSubnets = new Map<string, () => void>();

/**
 * A random 127.X.Y (X 100-249: test beds take 127.1-99) that no other live test process holds: a
 * lock file per subnet names its owner, and one whose owner is gone is taken over. Two clusters on
 * one subnet would bind each other's ports, and one test would talk to the other's nodes.
 */
export function claimSubnet(): string {
  fs.mkdirSync(SUBNET_LOCKS, { recursive: true });
  for (let tries = 0; tries < 1000; tries++) {
    const subnet = `127.${100 + Math.floor(Math.random() * 150)}.${Math.floor(Math.random() * 256)}`;
    const hold = holdPidFile(path.join(SUBNET_LOCKS, subnet));
    if ('release' in hold) {
      heldSubnets.set(subnet, hold.release);
      return subnet;
    }
  }
  throw new Error(`no free simulator subnet (${SUBNET_LOCKS})`);
}

export function releaseSubnet(subnet: string): void {
  heldSubnets.get(subnet)?.();
  heldSubnets.delete(subnet);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function waitFor<T>(desc: string, fn: () => Promise<T | undefined | null | false>, timeoutMs = 15_000, everyMs = 50): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown = undefined;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== null && v !== false) return v;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${desc} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(everyMs);
  }
}

export class SimCluster {
  subnet: string;
  root: string;
  size: number;
  env: Record<string, string>;
  token: string | null;
  procs = new Map<number, SimProc>();
  history: SimProc[] = [];
  dns: MiniDns | null = null;
  /** How its nodes run: one OS process each, or in this test process's fleet. */
  mode: 'process' | 'fleet';
  private ips = new Map<number, string>();

  constructor(opts: ClusterOptions = {}) {
    installExitHook();
    this.subnet = claimSubnet();
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'queen-sim-'));
    this.size = opts.size ?? 3;
    this.token = opts.token === undefined ? `tok-${Math.random().toString(36).slice(2)}` : opts.token;
    this.env = { ...FAST_ENV, ...(opts.env ?? {}) };
    this.mode = opts.mode ?? SIM_MODE;
    if (opts.dns) this.dns = new MiniDns();
  }

  // Starts the DNS server (dns mode only); call before starting nodes.
  async startDns(): Promise<void> {
    if (this.dns && this.dns.address === '') await this.dns.start(`${this.subnet}.250`, 5353);
  }

  // The node's current loopback address.
  ip(id: number): string {
    return this.ips.get(id) ?? `${this.subnet}.${id}`;
  }

  // The host name peers use: the pod FQDN in dns mode, else the literal IP.
  host(id: number): string {
    return this.dns ? `queen-${id - 1}.queen-headless.queen.svc.cluster.local` : this.ip(id);
  }

  raftAddr(id: number): string {
    return `${this.host(id)}:7400`;
  }

  httpAddr(id: number): string {
    return `${this.host(id)}:6632`;
  }

  peers(ids?: number[]): string {
    const list = ids ?? Array.from({ length: this.size }, (_, i) => i + 1);
    return list.map((id) => `${id}=${this.raftAddr(id)}/${this.httpAddr(id)}`).join(',');
  }

  dataDir(id: number): string {
    return path.join(this.root, `node-${id}`);
  }

  node(id: number): SimProc {
    const p = this.procs.get(id);
    if (!p) throw new Error(`node ${id} was never started`);
    return p;
  }

  start(id: number, opts: StartOptions = {}): SimProc {
    const prev = this.procs.get(id);
    if (prev && prev.running) throw new Error(`node ${id} is still running (pid ${prev.pid})`);
    const dir = this.dataDir(id);
    if (opts.ip) this.ips.set(id, opts.ip);
    if (this.dns) {
      if (this.dns.address === '') throw new Error('call startDns() before starting nodes in dns mode');
      this.dns.set(this.host(id), this.ip(id));
    }
    if (opts.wipe) fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      HOSTNAME: `queen-${id - 1}`,
      QUEEN_RAFT_REPLICATOR: 'openraft',
      QUEEN_RAFT_NODE_ID: 'ordinal',
      QUEEN_RAFT_PEERS: this.peers(Array.from({ length: Math.max(this.size, id) }, (_, i) => i + 1)),
      QUEEN_RAFT_DIR: '/var/lib/queen/raft',
      QUEEN_SIM_MOUNTS: JSON.stringify({ '/var/lib/queen/raft': dir }),
      QUEEN_SIM_IP: this.ip(id),
      QUEEN_SIM_EXIT_WITH_PARENT: String(process.pid),
      ...(this.dns ? { QUEEN_SIM_DNS: this.dns.address } : {}),
      ...(this.token !== null ? { QUEEN_RAFT_TOKEN: this.token } : {}),
      ...this.env,
      ...(opts.join ? { QUEEN_RAFT_JOIN: 'true' } : {}),
      ...(opts.env ?? {}),
    };
    let p: SimProc;
    if (this.mode === 'fleet') {
      p = new SimProc(id, simFleet().start(env, { stream: true }));
    } else {
      const child = spawn(node24(), [SIM_MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      live.add(child);
      p = new SimProc(id, child);
    }
    this.procs.set(id, p);
    this.history.push(p);
    return p;
  }

  startAll(ids?: number[], opts: StartOptions = {}): void {
    for (const id of ids ?? Array.from({ length: this.size }, (_, i) => i + 1)) this.start(id, opts);
  }

  async restart(id: number, opts: StartOptions = {}): Promise<SimProc> {
    const p = this.procs.get(id);
    if (p && p.running) await this.kill(id);
    return this.start(id, opts);
  }

  wipe(id: number): void {
    const p = this.procs.get(id);
    if (p && p.running) throw new Error(`node ${id} is running; stop it before wiping`);
    fs.rmSync(this.dataDir(id), { recursive: true, force: true });
  }

  async kill(id: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<number> {
    const p = this.node(id);
    if (!p.running) return p.exitCode!;
    p.kill(signal);
    return await p.exited;
  }

  sigterm(id: number): Promise<number> {
    const p = this.node(id);
    p.kill('SIGTERM');
    return p.exited;
  }

  async waitExit(id: number, timeoutMs = 15_000): Promise<number> {
    const p = this.node(id);
    const t = sleep(timeoutMs).then(() => -1);
    const code = await Promise.race([p.exited, t]);
    if (code === -1) throw new Error(`node ${id} did not exit within ${timeoutMs} ms`);
    return code;
  }

  // ---- HTTP --------------------------------------------------------------------------------

  async req(id: number, method: string, pth: string, body?: unknown, timeoutMs = 5000): Promise<HttpResult> {
    const res = await fetch(`http://${this.ip(id)}:6632${pth}`, {
      method,
      headers: body !== undefined ? { 'content-type': 'application/json' } : {},
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let json: unknown = null;
    try {
      json = text === '' ? null : JSON.parse(text);
    } catch {
      json = { raw: text };
    }
    return { status: res.status, json, headers: res.headers };
  }

  // Like req, but a connection failure or a timeout is a value: {error: 'refused' | 'timeout' | ...}.
  async tryReq(id: number, method: string, pth: string, body?: unknown, timeoutMs = 5000): Promise<TryResult> {
    try {
      return await this.req(id, method, pth, body, timeoutMs);
    } catch (e) {
      const err = e as { name?: string; cause?: { code?: string }; message?: string };
      if (err.name === 'TimeoutError' || err.name === 'AbortError') return { error: 'timeout' };
      if (err.cause?.code === 'ECONNREFUSED') return { error: 'refused' };
      return { error: err.cause?.code ?? err.message ?? 'error' };
    }
  }

  // A raft RPC straight to a node's raft port (with the cluster token unless told otherwise).
  async raft(id: number, route: string, body: unknown = {}, token: string | null | undefined = undefined): Promise<HttpResult> {
    const tok = token === undefined ? this.token : token;
    const res = await fetch(`http://${this.ip(id)}:7400${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(tok !== null ? { 'x-queen-raft-token': tok } : {}) },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(3000),
    });
    const text = await res.text();
    let json: unknown = null;
    try {
      json = text === '' ? null : JSON.parse(text);
    } catch {
      json = { raw: text };
    }
    return { status: res.status, json, headers: res.headers };
  }

  health(id: number, timeoutMs = 2000): Promise<TryResult> {
    return this.tryReq(id, 'GET', '/health', undefined, timeoutMs);
  }

  async membership(id: number): Promise<any> {
    const r = await this.req(id, 'GET', '/api/v1/system/raft/membership');
    if (r.status !== 200) throw new Error(`membership via node ${id}: HTTP ${r.status}`);
    return r.json.membership;
  }

  async info(id: number): Promise<any> {
    return (await this.req(id, 'GET', '/_sim/info')).json;
  }

  async put(id: number, key: string, value: unknown, timeoutMs = 5000): Promise<TryResult> {
    return this.tryReq(id, 'PUT', `/api/v1/kv/test/${encodeURIComponent(key)}`, { value, ttlSeconds: 600 }, timeoutMs);
  }

  // Writes n KV entries through node id, each acknowledged (200) before the next.
  async writeMany(id: number, n: number, prefix = 'k'): Promise<void> {
    for (let i = 0; i < n; i++) {
      const r = await this.put(id, `${prefix}-${i}`, { i });
      if (isError(r) || r.status !== 200) throw new Error(`write ${prefix}-${i} through node ${id} failed: ${JSON.stringify(isError(r) ? r : r.json)}`);
    }
  }

  // Cuts nodes a and b from each other (both ways), or heals that cut.
  async partition(a: number, b: number, on = true): Promise<void> {
    const set = async (x: number, y: number) => {
      const cur: string[] = (await this.info(x)).partitioned ?? [];
      const next = on ? [...new Set([...cur, this.ip(y)])] : cur.filter((ip) => ip !== this.ip(y));
      await this.req(x, 'POST', '/_sim/partition', { ips: next });
    };
    await set(a, b);
    await set(b, a);
  }

  running(): number[] {
    return [...this.procs.values()].filter((p) => p.running).map((p) => p.id);
  }

  // The node every running node (among `among`) that reports role leader, once exactly one does.
  async waitLeader(among?: number[], timeoutMs = 15_000): Promise<{ id: number; term: number }> {
    return waitFor(
      'a leader',
      async () => {
        const ids = among ?? this.running();
        const found: { id: number; term: number }[] = [];
        for (const id of ids) {
          const h = await this.health(id, 1000);
          if (!isError(h) && h.json?.raft?.role === 'leader') found.push({ id, term: h.json.raft.term });
        }
        if (found.length === 0) return undefined;
        found.sort((a, b) => b.term - a.term);
        return found[0];
      },
      timeoutMs,
    );
  }

  async waitHealthy(ids: number[], timeoutMs = 15_000): Promise<void> {
    for (const id of ids) {
      // 200 and holding state: a node that just joined can answer 200 (leader known, within the
      // lag slack) a heartbeat before its first entries arrive.
      await waitFor(`node ${id} healthy`, async () => {
        const h = await this.health(id, 1000);
        return !isError(h) && h.status === 200 && h.json.raft.applied > 0;
      }, timeoutMs);
    }
  }

  async close(): Promise<void> {
    const waits: Promise<number>[] = [];
    for (const p of this.history) {
      if (p.running) {
        p.kill('SIGKILL');
        waits.push(p.exited);
      }
    }
    await Promise.all(waits);
    this.dns?.close();
    fs.rmSync(this.root, { recursive: true, force: true });
    releaseSubnet(this.subnet);
  }
}

// The HTTP status of a TryResult, 0 for a connection failure or a timeout.
export function statusOf(r: TryResult): number {
  return isError(r) ? 0 : r.status;
}

// For afterEach: when the test failed, print the tail of every node's log (stderr).
export function dumpLogsIfFailed(ctx: { task: { name: string; result?: { state?: string } } }, c: SimCluster | null, lines = 25): void {
  if (!c || ctx.task.result?.state !== 'fail') return;
  const out: string[] = [`--- simulator logs for failed test: ${ctx.task.name} (subnet ${c.subnet}) ---`];
  for (const p of c.history) {
    out.push(`# node ${p.id} pid ${p.pid} exit ${p.exitCode}`);
    out.push(...p.lines.slice(-lines));
  }
  process.stderr.write(out.join('\n') + '\n');
}
