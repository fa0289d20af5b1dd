// Child processes of the test bed: each in its own process group, output to a log file, and all of
// them killed when the owning process exits, however it exits (short of SIGKILL). A simulated Queen
// node run in a fleet process (test/sim/fleet.ts) is a Proc too: it has a pid-like id instead of a
// pid, and the same signals, SIGKILL and exit (fleetNodeProc).
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { constants } from 'node:os';
import { dirname } from 'node:path';
import type { FleetNode } from '../sim/fleet-client.ts';
import { pidAlive } from '../../identity.ts';

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The exit code as a container runtime reports it: the code, or 128 + the signal number. */
  exitCode: number;
}

export interface Proc {
  name: string;
  /** Who started it (a test bed's folder), to tell apart several test beds in one process. */
  owner?: string;
  /** The process id; for a node in a fleet, its pid-like id (above any real pid). */
  pid: number;
  /** The OS process (none for a node in a fleet). */
  child?: ChildProcess;
  /** A simulated node inside a fleet process rather than a process of its own. */
  fleetNode?: FleetNode;
  logPath: string;
  exited: Promise<ExitInfo>;
  exit: ExitInfo | null;
}

const live = new Set<Proc>();
let exitHookInstalled = false;
const pidFiles = new Set<string>();

/** Keeps the process group ids of every live process in this file (for a watchdog). */
export function trackPidsIn(path: string): () => void {
  pidFiles.add(path);
  writePidFiles();
  return () => pidFiles.delete(path);
}

function writePidFiles(): void {
  if (!pidFiles.size) return;
  const text = [...live].map((p) => p.pid).join('\n') + '\n';
  for (const f of pidFiles) {
    try {
      writeFileSync(f, text);
    } catch {
      // the folder is gone (stopping)
    }
  }
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // gone already
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Synchronous: the last chance to leave nothing behind when the owner exits.
  process.on('exit', () => {
    for (const p of live) killGroup(p.pid, 'SIGKILL');
  });
}

export function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  if (signal) return 128 + (constants.signals[signal] ?? 9);
  return 255;
}

export interface StartOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  logPath: string;
  owner?: string;
}

export function startProcess(name: string, command: string, args: string[], opts: StartOptions): Proc {
  installExitHook();
  mkdirSync(dirname(opts.logPath), { recursive: true });
  const fd = openSync(opts.logPath, 'a');
  let child: ChildProcess;
  try {
    child = spawn(command, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ['ignore', fd, fd],
      detached: true, // own process group: signals from a terminal do not reach it, and the group can be killed whole
    });
  } finally {
    closeSync(fd);
  }
  let resolveExit!: (e: ExitInfo) => void;
  const proc: Proc = {
    name,
    owner: opts.owner,
    pid: child.pid ?? -1,
    child,
    logPath: opts.logPath,
    exited: new Promise((r) => (resolveExit = r)),
    exit: null,
  };
  const finish = (code: number | null, signal: NodeJS.Signals | null) => {
    if (proc.exit) return;
    proc.exit = { code, signal, exitCode: exitCodeOf(code, signal) };
    live.delete(proc);
    writePidFiles();
    // Like a container whose first process ended: nothing else of it keeps running.
    if (proc.pid > 0) killGroup(proc.pid, 'SIGKILL');
    resolveExit(proc.exit);
  };
  child.on('exit', finish);
  child.on('error', (err) => {
    // spawn failure (e.g. ENOENT): report as exit 127, as a shell would
    if (!proc.exit) {
      proc.exit = { code: 127, signal: null, exitCode: 127 };
      live.delete(proc);
      resolveExit(proc.exit);
    }
    void err;
  });
  if (proc.pid > 0) live.add(proc);
  writePidFiles();
  return proc;
}

/**
 * A simulated node running in a fleet process: its signals go to the fleet (SIGTERM and SIGINT
 * start its shutdown, SIGKILL ends it at once); when the fleet process dies, it is reported killed
 * (137). It is not among liveProcesses(): the fleet process is.
 */
export function fleetNodeProc(name: string, node: FleetNode, logPath: string, owner?: string): Proc {
  let resolveExit!: (e: ExitInfo) => void;
  const proc: Proc = { name, owner, pid: node.id, fleetNode: node, logPath, exited: new Promise((r) => (resolveExit = r)), exit: null };
  void node.exited.then((e) => {
    proc.exit = { code: e.code, signal: e.signal, exitCode: exitCodeOf(e.code, e.signal) };
    resolveExit(proc.exit);
  });
  return proc;
}

/** Sends a signal to the process itself (as a container runtime signals PID 1). */
export function signalProcess(p: Proc, signal: NodeJS.Signals): void {
  if (p.exit) return;
  if (p.fleetNode) {
    p.fleetNode.signal(signal);
    return;
  }
  try {
    process.kill(p.pid, signal);
  } catch {
    // gone already
  }
}

/** A signal to the whole process group (SIGSTOP and SIGCONT freeze and thaw a container). */
export function signalGroup(p: Proc, signal: NodeJS.Signals): void {
  if (p.fleetNode) signalProcess(p, signal);
  else if (!p.exit && p.pid > 0) killGroup(p.pid, signal);
}

export function killProcessGroup(p: Proc): void {
  if (p.fleetNode) signalProcess(p, 'SIGKILL');
  else if (p.pid > 0) killGroup(p.pid, 'SIGKILL');
}

/** SIGTERM (or the given signal), then SIGKILL to the whole group after graceMs. */
export async function stopProcess(p: Proc, graceMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<ExitInfo> {
  if (p.exit) return p.exit;
  signalProcess(p, signal);
  let timer: NodeJS.Timeout | undefined;
  const killed = new Promise<void>((r) => {
    timer = setTimeout(() => {
      killProcessGroup(p);
      r();
    }, graceMs);
  });
  await Promise.race([p.exited, killed]);
  clearTimeout(timer);
  return p.exited;
}

export function liveProcesses(): Proc[] {
  return [...live];
}

/** Whether a process of this machine runs with that pid (the operator's own test, identity.ts). */
export const isAlive = pidAlive;
