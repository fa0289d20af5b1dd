// The kubelet stand-in's broker fleets: one fleet process (test/sim/fleet.ts) per test bed node,
// started with the first Queen container the kubelet runs there in fleet mode, holding every such
// container of that node. A container in a fleet is a Proc (procs.ts fleetNodeProc) with the same
// signals, SIGKILL, exit and log file as a process. A fleet that dies takes its nodes with it (each
// exits 137); the next container of that node starts a new one.
import { join } from 'node:path';
import { FLEET_MAIN, SimFleet } from '../sim/fleet-client.ts';
import { fleetNodeProc, killProcessGroup, startProcess, type Proc } from './procs.ts';

const truthy = (v: string | undefined) => v !== undefined && ['1', 'true', 'yes', 'on'].includes(v.trim().toLowerCase());
const falsy = (v: string | undefined) => v !== undefined && ['0', 'false', 'no', 'off'].includes(v.trim().toLowerCase());

/**
 * Whether a Queen container runs in its node's fleet: QUEEN_SIM_FLEET in its environment (the
 * namespace's simulator settings, then the pod's own env) says so either way; without it, the test
 * bed's default.
 */
export function runsInFleet(env: Record<string, string>, testbedDefault: boolean): boolean {
  const v = env.QUEEN_SIM_FLEET;
  if (truthy(v)) return true;
  if (falsy(v)) return false;
  return testbedDefault;
}

export class SimFleets {
  #fleets = new Map<string, { fleet: SimFleet; proc: Proc | null }>();
  #dir: string;
  #owner: string;
  #log: (line: string) => void;

  constructor(o: { dir: string; owner: string; log: (line: string) => void }) {
    this.#dir = o.dir;
    this.#owner = o.owner;
    this.#log = o.log;
  }

  #fleetOf(node: string): SimFleet {
    const have = this.#fleets.get(node);
    if (have && !have.fleet.dead) return have.fleet;
    const entry: { fleet: SimFleet; proc: Proc | null } = { fleet: null as unknown as SimFleet, proc: null };
    const logPath = join(this.#dir, 'logs', `sim-fleet-${node}.log`);
    entry.fleet = new SimFleet((extra) => {
      const p = startProcess(`sim-fleet/${node}`, process.execPath, [FLEET_MAIN], {
        cwd: this.#dir,
        logPath,
        owner: this.#owner,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: process.env.HOME ?? '/tmp',
          ...(process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}),
          // The fleet's safety net, as the simulators': it exits when the test bed's process is gone.
          QUEEN_SIM_EXIT_WITH_PARENT: String(process.pid),
          ...extra,
        },
      });
      entry.proc = p;
      void p.exited.then((e) => this.#log(`sim fleet of ${node} (pid ${p.pid}) exited with code ${e.exitCode}`));
      return { pid: p.pid, kill: () => killProcessGroup(p), exited: p.exited };
    });
    this.#fleets.set(node, entry);
    this.#log(`sim fleet of ${node}: started`);
    return entry.fleet;
  }

  /** Runs a Queen container in the fleet of `node`; its log lines are appended to `logPath`. */
  start(node: string, name: string, env: Record<string, string>, logPath: string): Proc {
    const fn = this.#fleetOf(node).start(env, { log: logPath });
    return fleetNodeProc(name, fn, logPath, this.#owner);
  }

  /** The fleet processes (pid, nodes held). */
  fleets(): { node: string; pid: number; nodes: number; running: boolean }[] {
    return [...this.#fleets.entries()].map(([node, e]) => ({ node, pid: e.fleet.pid, nodes: e.fleet.size, running: !e.fleet.dead }));
  }

  /** The fleet of `node` (for measurements), if one runs. */
  fleet(node: string): SimFleet | undefined {
    const e = this.#fleets.get(node);
    return e && !e.fleet.dead ? e.fleet : undefined;
  }

  /** Kills every fleet process (and so every node they hold); resolves once they are gone. */
  async stop(): Promise<void> {
    const waits: Promise<unknown>[] = [];
    for (const e of this.#fleets.values()) {
      if (e.fleet.dead) continue;
      e.fleet.kill();
      if (e.proc) waits.push(e.proc.exited);
    }
    await Promise.all(waits);
  }
}
