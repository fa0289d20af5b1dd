// The parent's side of a broker fleet (fleet.ts): it listens on 127.0.0.1 for the fleet to call
// back, starts the fleet process (through a spawn function of the caller's, so a test bed can run
// it as one of its processes), and gives each node it starts there a handle: a pid-like id, a
// signal, its exit. Nodes can be started at once; what is asked before the fleet has called back
// is sent when it has. When the fleet process dies, every node it ran is reported killed (SIGKILL).

import { randomBytes } from 'node:crypto';
import * as net from 'node:net';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const FLEET_MAIN = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fleet.ts');

export interface FleetExit {
  /** The exit code, or null when the node was killed by a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** What the caller's spawn function returns for the fleet process. */
export interface FleetProcess {
  pid: number;
  kill(): void;
  exited: Promise<unknown>;
}

export interface FleetStats {
  nodes: number;
  rss: number;
  heapUsed: number;
  cpuUserUs: number;
  cpuSystemUs: number;
  /** process.getActiveResourcesInfo() of the fleet: its timers, sockets, servers... */
  resources: string[];
}

// Fleet nodes have pid-like ids above any pid Linux hands out (at most 2^22), unique in this process.
let lastId = 5_000_000;
export function nextFleetNodeId(): number {
  return ++lastId;
}

/** Signals one node of a fleet cannot be given: it has no process of its own to stop. */
const UNSUPPORTED = new Set(['SIGSTOP', 'SIGCONT', 'SIGTSTP']);

export class FleetNode {
  readonly id: number;
  exit: FleetExit | null = null;
  readonly exited: Promise<FleetExit>;
  /** Its log lines, when started with `stream`. */
  onLine: ((line: string) => void) | null = null;
  started = false;
  #resolve!: (e: FleetExit) => void;
  #fleet: SimFleet;

  constructor(id: number, fleet: SimFleet) {
    this.id = id;
    this.#fleet = fleet;
    this.exited = new Promise((r) => (this.#resolve = r));
  }

  get running(): boolean {
    return this.exit === null;
  }

  /** The pid of the fleet process that runs this node (with every other node of that fleet). */
  get processPid(): number {
    return this.#fleet.pid;
  }

  signal(sig: NodeJS.Signals): void {
    if (UNSUPPORTED.has(sig)) throw new Error(`${sig} cannot be sent to a simulated node in a fleet (it has no process of its own)`);
    if (this.exit) return;
    this.#fleet.send({ op: 'signal', id: this.id, signal: sig });
  }

  /** @internal */
  ended(e: FleetExit): void {
    if (this.exit) return;
    this.exit = e;
    this.#resolve(e);
  }
}

export class SimFleet {
  proc: FleetProcess | null = null;
  /** The fleet process is gone (or never started); its nodes are reported ended. */
  dead = false;
  /** Resolves once the fleet called back (rejects when it died first). */
  readonly ready: Promise<void>;
  #token = randomBytes(16).toString('hex');
  #server: net.Server;
  #sock: net.Socket | null = null;
  #queue: string[] = [];
  #nodes = new Map<number, FleetNode>();
  #stats = new Map<number, (s: FleetStats) => void>();
  #req = 0;
  #ready!: () => void;
  #notReady!: (e: Error) => void;
  #connectTimer: NodeJS.Timeout;

  /**
   * `spawn` starts the fleet process (`<node 24> FLEET_MAIN`) with these variables added to its
   * environment (the control channel's address and token).
   */
  constructor(spawn: (env: Record<string, string>) => FleetProcess) {
    this.ready = new Promise((res, rej) => {
      this.#ready = res;
      this.#notReady = rej;
    });
    this.ready.catch(() => {});
    this.#server = net.createServer((s) => this.#accept(s));
    this.#server.on('error', (e) => this.#gone(e));
    this.#server.listen(0, '127.0.0.1', () => {
      const { port } = this.#server.address() as net.AddressInfo;
      try {
        this.proc = spawn({ QUEEN_SIM_FLEET_CONTROL: `127.0.0.1:${port}`, QUEEN_SIM_FLEET_TOKEN: this.#token });
      } catch (e) {
        this.#gone(e as Error);
        return;
      }
      void this.proc.exited.then(() => this.#gone(new Error('the fleet process exited')));
    });
    this.#server.unref();
    this.#connectTimer = setTimeout(() => {
      if (!this.#sock) {
        this.proc?.kill();
        this.#gone(new Error('the fleet process did not call back within 60 s'));
      }
    }, 60_000);
    this.#connectTimer.unref();
  }

  get pid(): number {
    return this.proc?.pid ?? -1;
  }

  /** Nodes that run (or are starting) in it. */
  get size(): number {
    return this.#nodes.size;
  }

  #accept(s: net.Socket): void {
    s.setNoDelay(true);
    let buf = '';
    let greeted = false;
    s.on('error', () => {});
    s.on('data', (chunk: Buffer) => {
      buf += chunk.toString('utf8');
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        let msg: any;
        try {
          msg = JSON.parse(line);
        } catch {
          continue;
        }
        if (!greeted) {
          // Only the fleet this object started knows the token.
          if (msg.op !== 'hello' || msg.token !== this.#token || this.#sock) {
            s.destroy();
            return;
          }
          greeted = true;
          this.#sock = s;
          clearTimeout(this.#connectTimer);
          this.#server.close();
          s.on('close', () => this.#gone(new Error('the fleet closed its control channel')));
          for (const q of this.#queue.splice(0)) s.write(q);
          this.#ready();
          continue;
        }
        this.#onMessage(msg);
      }
    });
  }

  #onMessage(msg: any): void {
    switch (msg.op) {
      case 'started': {
        const n = this.#nodes.get(msg.id);
        if (n) n.started = true;
        return;
      }
      case 'log':
        this.#nodes.get(msg.id)?.onLine?.(msg.line);
        return;
      case 'exit': {
        const n = this.#nodes.get(msg.id);
        if (!n) return;
        this.#nodes.delete(msg.id);
        n.ended({ code: msg.code ?? null, signal: msg.signal ?? null });
        return;
      }
      case 'error': {
        // A start the fleet could not do (its log cannot be opened): as a process that could not be spawned.
        const n = this.#nodes.get(msg.id);
        if (n && !n.started) {
          this.#nodes.delete(msg.id);
          n.onLine?.(`fleet: ${msg.error}`);
          n.ended({ code: 127, signal: null });
        }
        return;
      }
      case 'stats': {
        const r = this.#stats.get(msg.req);
        this.#stats.delete(msg.req);
        r?.(msg as FleetStats);
        return;
      }
    }
  }

  /** @internal */
  send(msg: unknown): void {
    if (this.dead) return;
    const line = JSON.stringify(msg) + '\n';
    if (this.#sock) this.#sock.write(line);
    else this.#queue.push(line);
  }

  #gone(e: Error): void {
    if (this.dead) return;
    this.dead = true;
    clearTimeout(this.#connectTimer);
    this.#notReady(e);
    try {
      this.#server.close();
    } catch {
      // closed
    }
    this.#sock?.destroy();
    // Its nodes die with it: killed, as SIGKILL leaves a process (those it never started: 127).
    for (const n of this.#nodes.values()) n.ended(n.started ? { code: null, signal: 'SIGKILL' } : { code: 127, signal: null });
    this.#nodes.clear();
    for (const r of this.#stats.values()) r({ nodes: 0, rss: 0, heapUsed: 0, cpuUserUs: 0, cpuSystemUs: 0, resources: [] });
    this.#stats.clear();
  }

  /**
   * Starts a node with this environment. Its log lines are appended to `log`, or come back to
   * `onLine` with `stream`. Returns at once; the node's exit says how it ended.
   */
  start(env: Record<string, string>, opts: { log?: string; stream?: boolean; onLine?: (line: string) => void; id?: number } = {}): FleetNode {
    const n = new FleetNode(opts.id ?? nextFleetNodeId(), this);
    if (this.dead) {
      n.ended({ code: 127, signal: null });
      return n;
    }
    n.onLine = opts.onLine ?? null;
    this.#nodes.set(n.id, n);
    this.send({ op: 'start', id: n.id, env, log: opts.log ?? null, stream: opts.stream === true || !!opts.onLine });
    return n;
  }

  /** The fleet process's memory and CPU time so far. */
  async stats(): Promise<FleetStats> {
    await this.ready;
    const req = ++this.#req;
    return new Promise((resolve) => {
      this.#stats.set(req, resolve);
      this.send({ op: 'stats', req });
    });
  }

  /** Closes the control channel: the fleet process exits by itself (its nodes die with it). */
  close(): void {
    this.#sock?.end();
  }

  /** Kills the fleet process, and with it every node it runs (reported once it is gone). */
  kill(): void {
    if (this.proc) this.proc.kill();
    else this.#gone(new Error('killed before it started'));
  }
}
