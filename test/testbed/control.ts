// The control API of a running test bed: fault injection and inspection for tests, over HTTP on
// 127.0.0.1. JSON in, JSON out; errors are {"error": "..."} with 400/404.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { ClusterDns } from './dns.ts';
import type { Kubelet } from './kubelet.ts';
import type { PodNetwork } from './network.ts';
import type { Nodes } from './nodes.ts';
import type { RestartableProcess } from './restartable.ts';
import type { Storage } from './storage.ts';

export interface ControlDeps {
  kubelet: Kubelet;
  storage: Storage;
  nodes: Nodes;
  dns: ClusterDns;
  /** Control-plane processes that may be killed and started again (kube-apiserver, temporal). */
  processes?: RestartableProcess[];
  network: PodNetwork;
  info: () => unknown;
}

const SIM_ENV_NAME = /^(QUEEN_|JWT_)[A-Z0-9_]+$/;

class HttpError extends Error {
  status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

async function readJson(req: IncomingMessage): Promise<any> {
  let text = '';
  for await (const chunk of req) text += chunk;
  if (!text.trim()) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'the body is not JSON');
  }
}

const SIGNALS = new Set(['SIGKILL', 'SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGSTOP', 'SIGCONT', 'SIGUSR1', 'SIGUSR2']);

export async function startControlServer(d: ControlDeps, host = '127.0.0.1'): Promise<{ server: Server; url: string }> {
  const route = async (method: string, path: string, body: () => Promise<any>, query: URLSearchParams): Promise<unknown> => {
    let m: RegExpExecArray | null;
    if (method === 'GET' && path === '/') return d.info();
    if (method === 'GET' && path === '/pods') return d.kubelet.pods();
    if ((m = /^\/pods\/([^/]+)\/([^/]+)$/.exec(path)) && method === 'GET') {
      const info = d.kubelet.podInfo(m[1]!, m[2]!);
      if (!info) throw new HttpError(404, `no pod ${m[1]}/${m[2]} runs on the simulated nodes`);
      return info;
    }
    if ((m = /^\/pods\/([^/]+)\/([^/]+)\/(kill|release|wipe)$/.exec(path)) && method === 'POST') {
      const [, ns, name, action] = m as unknown as [string, string, string, string];
      if (!d.kubelet.podInfo(ns, name)) throw new HttpError(404, `no pod ${ns}/${name} runs on the simulated nodes`);
      const b = await body();
      if (action === 'kill') {
        const signal = String(b.signal ?? 'SIGKILL').toUpperCase();
        if (!SIGNALS.has(signal)) throw new HttpError(400, `unknown signal ${signal}`);
        const info = d.kubelet.podInfo(ns, name)!;
        const target = b.container ? info.containers.find((c) => c.name === b.container) : info.containers[0];
        if (target?.fleet && (signal === 'SIGSTOP' || signal === 'SIGCONT')) {
          throw new HttpError(400, `${signal}: ${ns}/${name} runs in a broker fleet, where a node cannot be frozen (it has no process of its own)`);
        }
        return d.kubelet.kill(ns, name, { signal: signal as NodeJS.Signals, hold: b.hold === true, container: b.container });
      }
      if (action === 'release') return d.kubelet.release(ns, name, { container: b.container });
      if (typeof b.volume !== 'string') throw new HttpError(400, 'wipe needs {"volume": "<volume name>"}');
      return d.kubelet.wipe(ns, name, b.volume, { container: b.container });
    }
    if (method === 'POST' && path === '/storage/resize-pending') {
      const b = await body();
      const share = Number(b.share);
      if (!(share >= 0 && share <= 1)) throw new HttpError(400, 'share must be a number from 0 to 1');
      if (b.nodeSilent !== undefined && typeof b.nodeSilent !== 'boolean') throw new HttpError(400, 'nodeSilent must be true or false');
      const nodeSilent = b.nodeSilent === true;
      if (typeof b.namespace === 'string' && b.namespace) {
        d.storage.resizePendingShareByNamespace.set(b.namespace, share);
        if (nodeSilent) d.storage.nodeSilentNamespaces.add(b.namespace);
        else d.storage.nodeSilentNamespaces.delete(b.namespace);
        return { share, namespace: b.namespace, nodeSilent };
      }
      d.storage.resizePendingShare = share;
      d.storage.nodeSilent = nodeSilent;
      return { share, nodeSilent };
    }
    if (method === 'GET' && path === '/storage/resize-pending') {
      return {
        share: d.storage.resizePendingShare,
        nodeSilent: d.storage.nodeSilent,
        namespaces: Object.fromEntries(d.storage.resizePendingShareByNamespace),
        nodeSilentNamespaces: [...d.storage.nodeSilentNamespaces],
      };
    }
    if ((m = /^\/nodes\/([^/]+)\/(stop|start)$/.exec(path)) && method === 'POST') {
      const [, node, action] = m as unknown as [string, string, string];
      if (!d.nodes.names.includes(node)) throw new HttpError(404, `no node ${node}`);
      const b = await body();
      await d.nodes.setUp(node, action === 'start');
      if (action === 'start') d.kubelet.resyncNode(node);
      else d.kubelet.nodeDown(node, { shutdown: b.shutdown === true });
      return { node, up: d.nodes.isUp(node), shutdown: action === 'stop' && b.shutdown === true };
    }
    if (method === 'POST' && path === '/network/partition') {
      const b = await body();
      const pod = (v: unknown) => (typeof v === 'string' && /^[^/]+\/[^/]+$/.test(v) ? v : null);
      const a = pod(b.a);
      const c = pod(b.b);
      if (!a || !c) throw new HttpError(400, 'partition needs {"a": "<ns>/<pod>", "b": "<ns>/<pod>", "on": true|false}');
      d.network.partition(a, c, b.on !== false);
      return { partitions: d.network.partitions() };
    }
    if (method === 'GET' && path === '/network/partition') return { partitions: d.network.partitions() };
    if ((m = /^\/network\/rules\/([^/]+)\/([^/]+)$/.exec(path)) && method === 'GET') {
      const pod = d.kubelet.podObject(m[1]!, m[2]!);
      if (!pod) throw new HttpError(404, `no pod ${m[1]}/${m[2]} runs on the simulated nodes`);
      return d.network.rulesFor(pod);
    }
    if (method === 'POST' && path === '/sim/env') {
      const b = await body();
      if (typeof b.namespace !== 'string' || !b.namespace) throw new HttpError(400, 'sim/env needs {"namespace": "...", "env": {"QUEEN_SIM_...": "..."}}');
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries((b.env ?? {}) as Record<string, unknown>)) {
        if (!SIM_ENV_NAME.test(k)) throw new HttpError(400, `${k} is not a simulator setting (QUEEN_* or JWT_*)`);
        env[k] = String(v);
      }
      if (Object.keys(env).length) d.kubelet.simEnv.set(b.namespace, env);
      else d.kubelet.simEnv.delete(b.namespace);
      return { namespace: b.namespace, env };
    }
    if (method === 'GET' && path === '/sim/env') return Object.fromEntries(d.kubelet.simEnv);
    if (method === 'GET' && path === '/sim/fleets') return d.kubelet.fleets.fleets();
    if (method === 'POST' && path === '/registry') {
      const b = await body();
      if (b.missing !== undefined) {
        if (!Array.isArray(b.missing) || b.missing.some((x: unknown) => typeof x !== 'string')) throw new HttpError(400, 'missing must be a list of tags or images');
        d.kubelet.registry.missing.clear();
        for (const x of b.missing) d.kubelet.registry.missing.add(x);
      }
      if (b.pullSeconds !== undefined) {
        const n = Number(b.pullSeconds);
        if (!(n >= 0)) throw new HttpError(400, 'pullSeconds must be a number >= 0');
        d.kubelet.registry.pullSeconds = n;
      }
      if (b.forget === true) d.kubelet.registry.forget();
      return d.kubelet.registry.state();
    }
    if (method === 'GET' && path === '/registry') return d.kubelet.registry.state();
    if (method === 'POST' && path === '/storage/resize-fails') {
      const b = await body();
      if (typeof b.namespace !== 'string' || !b.namespace) throw new HttpError(400, 'resize-fails needs {"namespace": "...", "on": true|false}');
      if (b.on === false) d.storage.resizeFailing.delete(b.namespace);
      else d.storage.resizeFailing.add(b.namespace);
      return { namespaces: [...d.storage.resizeFailing] };
    }
    if (method === 'GET' && path === '/processes') {
      return (d.processes ?? []).map((p) => ({ name: p.name, pid: p.current().pid, running: p.running() }));
    }
    if ((m = /^\/processes\/([^/]+)\/(kill|start)$/.exec(path)) && method === 'POST') {
      const [, name, action] = m as unknown as [string, string, string];
      const p = (d.processes ?? []).find((x) => x.name === name);
      if (!p) throw new HttpError(404, `no process ${name}; there are: ${(d.processes ?? []).map((x) => x.name).join(', ')}`);
      if (action === 'kill') {
        const b = await body();
        const signal = String(b.signal ?? 'SIGKILL').toUpperCase();
        if (!SIGNALS.has(signal)) throw new HttpError(400, `unknown signal ${signal}`);
        const exit = await p.kill(signal as NodeJS.Signals);
        return { name, running: p.running(), exitCode: exit.exitCode };
      }
      await p.start();
      return { name, running: p.running(), pid: p.current().pid };
    }
    if (method === 'GET' && path === '/dns') {
      const name = query.get('name');
      if (!name) throw new HttpError(400, 'give ?name=<fqdn>');
      return d.dns.lookup(name);
    }
    throw new HttpError(404, `no route ${method} ${path}`);
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://control');
    route(req.method ?? 'GET', url.pathname.replace(/\/$/, '') || '/', () => readJson(req), url.searchParams).then(
      (out) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(out));
      },
      (e: unknown) => {
        const status = e instanceof HttpError ? e.status : 500;
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: (e as Error).message }));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { server, url: `http://${host}:${port}` };
}
