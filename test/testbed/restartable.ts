// Control-plane processes a test can kill and start again, as a crash of the machine that runs one
// looks to everything else: the Temporal server (started again on its state file and its ports) and
// the API server (etcd keeps the data; its certificate and flags stay). The control API exposes
// them as /processes/{name}/kill and /processes/{name}/start.
import { signalProcess, stopProcess, type ExitInfo, type Proc } from './procs.ts';

export interface RestartableProcess {
  name: string;
  /** The process running now (or the one that ran last). */
  current(): Proc;
  running(): boolean;
  /** Kills it (SIGKILL unless told) and resolves once it exited; it stays down until start(). */
  kill(signal?: NodeJS.Signals): Promise<ExitInfo>;
  /** Starts it again with the same arguments and data; resolves once it serves. Running already: nothing. */
  start(): Promise<void>;
}

export function restartable(
  name: string,
  first: Proc,
  launch: () => Promise<Proc>,
  serving: (p: Proc) => Promise<void>,
): RestartableProcess {
  let proc = first;
  let starting: Promise<void> | null = null;
  return {
    name,
    current: () => proc,
    running: () => !proc.exit,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (starting) await starting.catch(() => undefined);
      if (proc.exit) return proc.exit;
      if (signal === 'SIGKILL') return stopProcess(proc, 0, 'SIGKILL');
      signalProcess(proc, signal);
      return stopProcess(proc, 10_000, signal);
    },
    start() {
      if (starting) return starting;
      if (!proc.exit) return Promise.resolve();
      starting = (async () => {
        proc = await launch();
        await serving(proc);
      })().finally(() => {
        starting = null;
      });
      return starting;
    },
  };
}
