// The kubelet's HTTPS API, for `kubectl logs`: the API server proxies a pod's log request to the
// node's InternalIP at its kubelet port, and this answers /containerLogs/{ns}/{pod}/{container}
// (previous, tailLines, limitBytes and follow honoured) from the container's log file. No exec,
// attach or port-forward.
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface LogSource {
  path: string;
  running: () => boolean;
}

const START = /^--- test bed: .* starting container /;
const MARKER = /^--- test bed: /;

/** The log lines of one container run: the current one (0) or the previous one (1). */
export function containerRun(text: string, back: 0 | 1): string[] | null {
  const runs: string[][] = [];
  for (const line of text.split('\n')) {
    if (START.test(line)) runs.push([]);
    else if (!MARKER.test(line) && runs.length) runs[runs.length - 1]!.push(line);
  }
  const run = runs[runs.length - 1 - back];
  if (!run) return null;
  if (run.length && run[run.length - 1] === '') run.pop();
  return run;
}

export async function startKubeletServer(opts: {
  nodeIps: string[];
  cert: string;
  key: string;
  lookup: (ns: string, pod: string, container: string | undefined) => LogSource | undefined;
}): Promise<{ port: number; stop(): Promise<void> }> {
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'https://kubelet');
    if (url.pathname === '/healthz') {
      res.end('ok');
      return;
    }
    const m = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(url.pathname);
    if (!m) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('the test bed kubelet serves container logs only\n');
      return;
    }
    const [, ns, pod, container] = m as unknown as [string, string, string, string];
    const src = opts.lookup(decodeURIComponent(ns), decodeURIComponent(pod), decodeURIComponent(container));
    if (!src || !existsSync(src.path)) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end(`container "${container}" in pod "${pod}" is not available\n`);
      return;
    }
    const previous = url.searchParams.get('previous') === 'true';
    const follow = url.searchParams.get('follow') === 'true' && !previous;
    const tail = url.searchParams.has('tailLines') ? Number(url.searchParams.get('tailLines')) : undefined;
    const limit = url.searchParams.has('limitBytes') ? Number(url.searchParams.get('limitBytes')) : undefined;
    const text = readFileSync(src.path, 'utf8');
    let lines = containerRun(text, previous ? 1 : 0);
    if (!lines) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(previous ? `previous terminated container "${container}" in pod "${pod}" not found\n` : `container "${container}" in pod "${pod}" has not started\n`);
      return;
    }
    if (tail !== undefined && tail >= 0) lines = lines.slice(Math.max(0, lines.length - tail));
    let out = lines.length ? lines.join('\n') + '\n' : '';
    if (limit !== undefined && limit >= 0) out = out.slice(0, limit);
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write(out);
    if (!follow) {
      res.end();
      return;
    }
    // Follow: stream what is appended until this container run ends or the client goes.
    let offset = Buffer.byteLength(text);
    let partial = '';
    const timer = setInterval(() => {
      let size = 0;
      try {
        size = statSync(src.path).size;
      } catch {
        size = offset;
      }
      if (size > offset) {
        const fd = openSync(src.path, 'r');
        const buf = Buffer.alloc(size - offset);
        readSync(fd, buf, 0, buf.length, offset);
        closeSync(fd);
        offset = size;
        const chunk = (partial + buf.toString('utf8')).split('\n');
        partial = chunk.pop() ?? '';
        for (const line of chunk) {
          if (START.test(line)) return end();
          if (!MARKER.test(line)) res.write(line + '\n');
        }
      } else if (!src.running()) {
        end();
      }
    }, 250);
    const end = () => {
      clearInterval(timer);
      res.end();
    };
    req.on('close', () => clearInterval(timer));
  };

  for (let attempt = 0; ; attempt++) {
    const servers: Server[] = [];
    try {
      let port = 0;
      for (const ip of opts.nodeIps) {
        const s = createServer({ cert: opts.cert, key: opts.key }, handler);
        servers.push(s);
        await new Promise<void>((resolve, reject) => {
          s.once('error', reject);
          s.listen(port, ip, () => resolve());
        });
        port = (s.address() as { port: number }).port;
      }
      for (const s of servers) s.unref();
      return {
        port,
        stop: async () => {
          await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
        },
      };
    } catch (e) {
      await Promise.all(servers.map((s) => new Promise<void>((r) => (s.listening ? s.close(() => r()) : r()))));
      if (attempt >= 5) throw e;
    }
  }
}
