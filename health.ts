// /healthz and /readyz of the operator process. Ready: the watches have synced and the worker
// polls (whichever of the two this process runs). Healthy: the worker has not stopped, and the
// watches have not been broken for longer than the grace the flags give. Each answer lists its
// checks, so `kubectl describe pod` and a curl say which one failed.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Worker } from '@temporalio/worker';
import type { Options } from './options.ts';
import type { ClusterCache } from './activities/cluster-cache.ts';

export interface Check {
  name: string;
  ok: boolean;
  /** What is wrong, when it is. */
  detail?: string;
}

export interface HealthChecks {
  live(): Check[];
  ready(): Check[];
}

export type Route = (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

/** Answers with the checks: 200 "ok" when all pass, else 503 and the failing ones. */
export function checksRoute(checks: () => Check[]): Route {
  return (_req, res) => {
    const all = checks();
    const failing = all.filter((c) => !c.ok);
    const body = all.map((c) => `[${c.ok ? '+' : '-'}]${c.name} ${c.ok ? 'ok' : `failed: ${c.detail ?? ''}`}`).join('\n');
    res.writeHead(failing.length ? 503 : 200, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(`${body}\n${failing.length ? `${failing.length} check${failing.length === 1 ? '' : 's'} failed` : 'ok'}\n`);
  };
}

/** An HTTP server of a few routes, on `port` (and `host`, or every interface). */
export async function serve(what: string, port: number, host: string | undefined, routes: Record<string, Route>): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    const route = routes[path];
    if (!route || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found; try ${Object.keys(routes).join(', ')}\n`);
      return;
    }
    Promise.resolve(route(req, res)).catch((err) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`${String(err)}\n`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const where = `${host ?? '*'}:${port}`;
      reject(
        new Error(
          err.code === 'EADDRINUSE'
            ? `${what}: the port ${where} is taken by another process (choose another with its flag)`
            : err.code === 'EADDRNOTAVAIL'
              ? `${what}: ${host} is not an address of this machine (--bind-address)`
              : err.code === 'EACCES'
                ? `${what}: not allowed to listen on ${where} (a port under 1024 needs privileges)`
                : `${what}: cannot listen on ${where}: ${err.message}`,
        ),
      );
    });
    server.listen(port, host, () => resolve());
  });
  server.unref();
  return server;
}

/** What the health endpoints look at: set as the parts come up, and cleared as they stop. */
export interface Parts {
  kubernetes: boolean;
  temporal: boolean;
  worker: Worker | null;
  /** The process's watches (the watcher decides on them, the observers read resting clusters). */
  watches: ClusterCache | null;
  stopping: boolean;
}

/** The liveness and readiness checks of the parts this process runs. */
export function healthChecks(opts: Options, parts: Parts): HealthChecks {
  const workerCheck = (forLiveness: boolean): Check => {
    if (!opts.run.has('worker')) return { name: 'worker', ok: true };
    const state = parts.worker?.getState();
    if (forLiveness) {
      // Not yet started is alive (connecting); stopped or failed is not.
      const dead = state === 'FAILED' || (state === 'STOPPED' && !parts.stopping);
      return { name: 'worker', ok: !dead, detail: `the worker is ${state}` };
    }
    return { name: 'worker', ok: state === 'RUNNING', detail: state ? `the worker is ${state}` : 'the worker has not started' };
  };
  const watchCheck = (forLiveness: boolean): Check => {
    if (!opts.run.has('watcher')) return { name: 'watches', ok: true };
    const w = parts.watches?.health();
    if (forLiveness) {
      const ok = !w || w.brokenFor <= opts.unhealthyAfterMs;
      return { name: 'watches', ok, detail: w ? `broken for ${Math.round(w.brokenFor / 1000)}s: ${w.detail}` : '' };
    }
    // Not ready before the first sync, nor while a watch has been broken for more than a moment.
    return { name: 'watches', ok: !!w?.synced && w.brokenFor < 5000, detail: w ? w.detail : 'not started' };
  };
  return {
    live: (): Check[] => [workerCheck(true), watchCheck(true)],
    ready: (): Check[] => [
      { name: 'stopping', ok: !parts.stopping, detail: 'the process is stopping' },
      { name: 'kubernetes', ok: parts.kubernetes, detail: 'the API server has not answered yet' },
      { name: 'temporal', ok: parts.temporal, detail: `the Temporal frontend ${opts.temporal.address} has not answered yet` },
      workerCheck(false),
      watchCheck(false),
    ],
  };
}
