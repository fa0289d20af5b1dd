// A broker fleet: ONE Node.js process that runs many simulated Queen nodes (test/sim/node.ts), each
// on its own loopback address, with the API and behaviour of a node in a process of its own
// (main.ts). The process that starts it commands it over a control channel on 127.0.0.1: the fleet
// connects to QUEEN_SIM_FLEET_CONTROL (host:port, loopback only), says QUEEN_SIM_FLEET_TOKEN, then
// reads and writes JSON lines:
//
//   → {"op":"start","id":N,"env":{...},"log":"/path"|null,"stream":bool}   start node N (its id is
//       its pid-like id on /_sim/info); its log lines go to the file (appended), or back as
//       {"op":"log","id":N,"line":"..."} with stream
//   → {"op":"signal","id":N,"signal":"SIGTERM"|"SIGINT"|"SIGKILL"|...}
//   → {"op":"stats","req":R}   ← {"op":"stats","req":R,"nodes":n,"rss":..,"heapUsed":..,"cpuUserUs":..,"cpuSystemUs":..,"resources":[...]}
//   ← {"op":"exit","id":N,"code":c|null,"signal":"SIGKILL"|...|null}   a node ended
//
// SIGTERM and SIGINT run the node's shutdown sequence; SIGKILL ends it at once (its sockets closed,
// its timers cancelled, its calls abandoned, nothing more written); SIGHUP, SIGQUIT and SIGUSR2 end
// it as abruptly (Node.js dies of them), SIGUSR1 does nothing (it would start the inspector); SIGSTOP
// and SIGCONT cannot be done to one node (the answer is {"op":"error"}).
//
// The fleet exits when the control channel closes or when QUEEN_SIM_EXIT_WITH_PARENT's process is
// gone, and its nodes die with it (their parent sees the channel close: exit 137 for each).

import { AsyncLocalStorage } from 'node:async_hooks';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { startSimNode, type SimNode } from './node.ts';

interface Entry {
  id: number;
  node: SimNode | null;
  fd: number | null;
  /** The signal it was killed with, when not SIGKILL (SIGHUP...). */
  killedBy: string | null;
}

const control = process.env.QUEEN_SIM_FLEET_CONTROL ?? '';
const token = process.env.QUEEN_SIM_FLEET_TOKEN ?? '';
const m = /^(127\.\d+\.\d+\.\d+):(\d+)$/.exec(control);
if (!m) {
  process.stderr.write(`queen-sim-fleet: QUEEN_SIM_FLEET_CONTROL=${control} is not a loopback host:port\n`);
  process.exit(2);
}

const nodes = new Map<number, Entry>();
/** Which node the code running now belongs to (an exception is that node's crash, not the fleet's). */
const current = new AsyncLocalStorage<Entry>();

process.on('uncaughtException', (e) => {
  const entry = current.getStore();
  if (entry?.node && !entry.node.ended) {
    entry.node.crash(e);
    return;
  }
  process.stderr.write(`queen-sim-fleet: uncaught exception outside any node: ${e instanceof Error ? e.stack : String(e)}\n`);
});
process.on('unhandledRejection', (e) => {
  const entry = current.getStore();
  if (entry?.node && !entry.node.ended) {
    entry.node.crash(e);
    return;
  }
  process.stderr.write(`queen-sim-fleet: unhandled rejection outside any node: ${e instanceof Error ? e.stack : String(e)}\n`);
});

const sock = net.connect({ host: m[1]!, port: Number(m[2]) });
sock.setNoDelay(true);
const send = (msg: unknown): void => {
  if (!sock.destroyed) sock.write(JSON.stringify(msg) + '\n');
};

function dieWithNodes(why: string): never {
  for (const e of nodes.values()) e.node?.exit(137, why);
  process.exit(137);
}

sock.on('connect', () => send({ op: 'hello', token, pid: process.pid }));
sock.on('error', () => {});
// The parent's end of the channel is gone: the parent is.
sock.on('close', () => dieWithNodes('the process that started this fleet is gone; exiting'));

function writeLine(entry: Entry, line: string, stream: boolean): void {
  if (stream) send({ op: 'log', id: entry.id, line });
  if (entry.fd !== null) {
    try {
      fs.writeSync(entry.fd, line + '\n');
    } catch {
      // the log's folder is gone (the test bed is stopping)
    }
  }
}

function start(id: number, env: Record<string, string>, log: string | null, stream: boolean): void {
  if (nodes.has(id)) {
    send({ op: 'error', id, error: `node ${id} exists` });
    return;
  }
  const entry: Entry = { id, node: null, fd: null, killedBy: null };
  if (log) {
    try {
      entry.fd = fs.openSync(log, 'a');
    } catch (e) {
      send({ op: 'error', id, error: `cannot open the log ${log}: ${(e as Error).message}` });
      return;
    }
  }
  nodes.set(id, entry);
  current.run(entry, () => {
    const node = startSimNode(env, { id, shared: true, log: (line) => writeLine(entry, line, stream) });
    entry.node = node;
    void node.exited.then((x) => {
      nodes.delete(id);
      if (entry.fd !== null) fs.closeSync(entry.fd);
      entry.fd = null;
      send({ op: 'exit', id, code: x.code, signal: entry.killedBy ?? x.signal });
    });
  });
  send({ op: 'started', id });
}

/** A signal Node.js dies of without a handler: the node ends as abruptly as under SIGKILL. */
const DEADLY = new Set(['SIGHUP', 'SIGQUIT', 'SIGUSR2', 'SIGABRT', 'SIGALRM']);

function signal(id: number, sig: string): void {
  const entry = nodes.get(id);
  const node = entry?.node;
  if (!entry || !node || node.ended) return;
  if (sig === 'SIGTERM' || sig === 'SIGINT' || sig === 'SIGKILL') {
    current.run(entry, () => node.signal(sig));
    return;
  }
  if (DEADLY.has(sig)) {
    entry.killedBy = sig;
    current.run(entry, () => node.signal('SIGKILL'));
    return;
  }
  if (sig === 'SIGUSR1') return;
  send({ op: 'error', id, error: `${sig} cannot be sent to one node of a fleet` });
}

let buf = '';
sock.on('data', (chunk: Buffer) => {
  buf += chunk.toString('utf8');
  let i: number;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    if (line === '') continue;
    let msg: { op?: string; id?: number; env?: Record<string, string>; log?: string | null; stream?: boolean; signal?: string; req?: number };
    try {
      msg = JSON.parse(line);
    } catch {
      continue;
    }
    switch (msg.op) {
      case 'start':
        start(Number(msg.id), msg.env ?? {}, msg.log ?? null, msg.stream === true);
        break;
      case 'signal':
        signal(Number(msg.id), String(msg.signal));
        break;
      case 'stats': {
        const mem = process.memoryUsage();
        const cpu = process.cpuUsage();
        send({
          op: 'stats',
          req: msg.req,
          nodes: nodes.size,
          rss: mem.rss,
          heapUsed: mem.heapUsed,
          cpuUserUs: cpu.user,
          cpuSystemUs: cpu.system,
          // What keeps the process busy: a killed node leaves no timer or socket behind.
          resources: process.getActiveResourcesInfo(),
        });
        break;
      }
    }
  }
});

// Test-bed safety net: exit when the process that started the fleet is gone.
const parentPid = Number(process.env.QUEEN_SIM_EXIT_WITH_PARENT ?? '');
if (Number.isInteger(parentPid) && parentPid > 1) {
  setInterval(() => {
    try {
      process.kill(parentPid, 0);
    } catch {
      dieWithNodes('the test process that started this node is gone; exiting');
    }
  }, 1000).unref();
}
