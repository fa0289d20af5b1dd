// The Temporal dev server of the test bed (the Temporal CLI's `server start-dev`, with its Web UI),
// on free loopback ports. Usable alone: startTemporal({dir}).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { freePorts, releasePorts } from './ports.ts';
import { startProcess, stopProcess, type Proc } from './procs.ts';
import { ensureTools } from './tools.ts';

export interface TemporalServer {
  /** host:port of the frontend gRPC service. */
  address: string;
  namespace: 'default';
  uiUrl: string;
  /** The frontend's HTTP API. */
  httpUrl: string;
  proc: Proc;
  /** The ports it listens on: a server started again with them is the same server to its clients. */
  ports: TemporalPorts;
  /** Resolves once the default namespace answers and the Web UI serves. */
  ready: Promise<void>;
  stop(): Promise<void>;
}

export interface TemporalPorts {
  port: number;
  uiPort: number;
  httpPort: number;
  metricsPort: number;
}

export interface TemporalOptions {
  /** Folder for the database file and the log. */
  dir: string;
  /** Keep workflow state in a file in dir (default true); false keeps it in memory. */
  persistent?: boolean;
  /** The temporal binary; default the test bed's cached build. */
  temporalBin?: string;
  owner?: string;
  timeoutMs?: number;
  /** Listen on these ports (a server started again on its state file); default free ones. */
  ports?: TemporalPorts;
}

async function ok(url: string): Promise<boolean> {
  try {
    const res = await request(url, { headersTimeout: 3000, bodyTimeout: 3000 });
    await res.body.text();
    return res.statusCode === 200;
  } catch {
    return false;
  }
}

/** Starts the dev server and returns at once; `ready` says when it serves. */
export async function launchTemporal(opts: TemporalOptions): Promise<TemporalServer> {
  const bin = opts.temporalBin ?? (await ensureTools()).temporal;
  mkdirSync(opts.dir, { recursive: true });
  const [port, uiPort, httpPort, metricsPort] = opts.ports
    ? [opts.ports.port, opts.ports.uiPort, opts.ports.httpPort, opts.ports.metricsPort]
    : ((await freePorts(4, `temporal ${opts.dir}`)) as [number, number, number, number]);
  // Ports this launch reserved are released when it is stopped; a server started again on the ports
  // of an earlier one leaves them to that one.
  const reserved = opts.ports ? [] : [port, uiPort, httpPort, metricsPort];
  const args = [
    'server', 'start-dev',
    '--ip', '127.0.0.1',
    '--port', String(port),
    '--ui-port', String(uiPort),
    '--http-port', String(httpPort),
    '--metrics-port', String(metricsPort),
    '--log-level', 'warn',
    // Loopback only: no periodic version check to temporal.io.
    '--dynamic-config-value', 'frontend.enableServerVersionCheck=false',
    // A step's activity handed to the worker with the workflow task that schedules it, as Temporal
    // 1.32 and later do by default (docs/temporal.md).
    '--dynamic-config-value', 'system.enableActivityEagerExecution=true',
  ];
  if (opts.persistent !== false) {
    // SQLite's write-ahead log, synced at its checkpoints: a commit waits for no disk flush, and
    // one commit no longer blocks the reads. The state file survives the server's process being
    // killed (the chaos tests do), not the machine's crash, as etcd's here (--unsafe-no-fsync).
    // The CLI's default (a rollback journal, flushed at every commit, one writer) held every
    // workflow and activity task among 50 upgrades on this machine's disk: a workflow task's
    // completion took 168 ms and a run's start 609 ms (mean), now 14 and 45 (bench scale).
    args.push('--db-filename', join(opts.dir, 'temporal.db'), '--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal');
  }
  const proc = startProcess('temporal', bin, args, {
    logPath: join(opts.dir, 'temporal.log'),
    cwd: opts.dir,
    // Its own HOME, so no user-level Temporal CLI configuration applies.
    env: { ...process.env, HOME: opts.dir, TEMPORAL_VERSION_CHECK_DISABLED: '1' },
    owner: opts.owner,
  });
  const address = `127.0.0.1:${port}`;
  const uiUrl = `http://127.0.0.1:${uiPort}`;
  const httpUrl = `http://127.0.0.1:${httpPort}`;
  const timeoutMs = opts.timeoutMs ?? 90_000;
  const ready = (async () => {
    const deadline = Date.now() + timeoutMs;
    for (const url of [`${httpUrl}/api/v1/namespaces/default`, `${uiUrl}/`]) {
      while (!(await ok(url))) {
        if (proc.exit) throw new Error(`the Temporal dev server exited with code ${proc.exit.exitCode}; see ${proc.logPath}`);
        if (Date.now() > deadline) throw new Error(`the Temporal dev server did not serve within ${timeoutMs / 1000} s; see ${proc.logPath}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  })();
  ready.catch(() => {});
  return {
    address,
    namespace: 'default',
    uiUrl,
    httpUrl,
    proc,
    ports: { port: port!, uiPort: uiPort!, httpPort: httpPort!, metricsPort: metricsPort! },
    ready,
    async stop() {
      await stopProcess(proc, 5000);
      releasePorts(reserved);
    },
  };
}

/** Starts the dev server and waits until it serves. */
export async function startTemporal(opts: TemporalOptions): Promise<TemporalServer> {
  const t = await launchTemporal(opts);
  try {
    await t.ready;
  } catch (e) {
    await t.stop();
    throw e;
  }
  return t;
}
