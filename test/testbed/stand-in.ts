// A tiny container process for the test bed's own tests (image name containing
// "testbed-stand-in"): an HTTP server on the pod address that shows what the container got (its
// environment, its mounts) and does what a test asks (answer /health with a chosen status, exit
// with a chosen code). Each start is counted in a file on the volume mounted at /data, if any.
//
//   GET  /health          200, or the status set with POST /health?status=N
//   GET  /env             the process environment (JSON)
//   GET  /starts          how many times a container has started on this /data volume
//   POST /exit?code=N     exits with code N
//   SIGTERM               exits 0 after STANDIN_TERM_DELAY_MS (default 0), or never if STANDIN_IGNORE_TERM=1
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';

const ip = process.env.QUEEN_SIM_IP ?? '127.0.0.1';
const port = Number(process.env.PORT ?? '8080');
const mounts: Record<string, string> = JSON.parse(process.env.QUEEN_SIM_MOUNTS ?? '{}');
const data = mounts['/data'];
let starts = 0;
if (data) {
  mkdirSync(data, { recursive: true });
  appendFileSync(join(data, 'starts'), `${new Date().toISOString()} ${process.pid}\n`);
  starts = readFileSync(join(data, 'starts'), 'utf8').trim().split('\n').length;
}
let health = Number(process.env.STANDIN_HEALTH ?? '200');

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  const json = (status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (url.pathname === '/health' && req.method === 'GET') return json(health, { status: health });
  if (url.pathname === '/health' && req.method === 'POST') {
    health = Number(url.searchParams.get('status') ?? '200');
    return json(200, { status: health });
  }
  if (url.pathname === '/env') return json(200, process.env);
  if (url.pathname === '/starts') return json(200, { starts });
  if (url.pathname === '/exit' && req.method === 'POST') {
    const code = Number(url.searchParams.get('code') ?? '1');
    json(200, { exiting: code });
    setTimeout(() => process.exit(code), 20);
    return;
  }
  json(404, { error: 'no route' });
});
server.listen(port, ip, () => console.log(`stand-in listening on ${ip}:${port}`));

process.on('SIGTERM', () => {
  console.log('stand-in: SIGTERM');
  if (process.env.STANDIN_IGNORE_TERM === '1') return;
  setTimeout(() => process.exit(0), Number(process.env.STANDIN_TERM_DELAY_MS ?? '0'));
});
