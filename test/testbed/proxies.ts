// Network pieces a test puts between the operator and what it talks to: a TCP proxy that can be
// cut and restored (an API server or a Temporal frontend that stops answering, then comes back),
// and a TLS terminator in front of a plaintext gRPC server (a Temporal frontend that requires TLS,
// optionally mutual TLS), with certificates made by openssl. Loopback only.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { connect as http2Connect, createSecureServer, constants as h2, type ClientHttp2Session } from 'node:http2';
import { createServer as createTlsServer } from 'node:tls';

export interface Proxy {
  /** host:port to give the client. */
  address: string;
  port: number;
  /** Stops listening (new connections are refused) and breaks the open ones. */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

/** cut/restore/close of a listener that pipes its connections (tracked in `open`). */
function controls(server: Server, port: number, open: Set<Socket>): Pick<Proxy, 'cut' | 'restore' | 'close'> {
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of open) s.destroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });
  return {
    cut: stop,
    restore: async () => {
      if (!server.listening) await listen(server, port);
    },
    close: stop,
  };
}

function pipeTo(client: Socket, target: { host: string; port: number }, open: Set<Socket>) {
  const upstream = connect(target.port, target.host);
  open.add(client);
  open.add(upstream);
  const done = () => {
    open.delete(client);
    open.delete(upstream);
    client.destroy();
    upstream.destroy();
  };
  client.on('error', done).on('close', done);
  upstream.on('error', done).on('close', done);
  client.pipe(upstream).pipe(client);
}

function hostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  return { host: address.slice(0, i), port: Number(address.slice(i + 1)) };
}

async function listen(server: Server, port = 0): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return (server.address() as { port: number }).port;
}

/** A TCP proxy to `target` (host:port) on a loopback port (or `port`). */
export async function startTcpProxy(target: string, port = 0): Promise<Proxy> {
  const t = hostPort(target);
  const open = new Set<Socket>();
  const server = createServer((client) => pipeTo(client, t, open));
  const p = await listen(server, port);
  return { address: `127.0.0.1:${p}`, port: p, ...controls(server, p, open) };
}

export interface Pki {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A CA that signed nothing here: the wrong one to trust. */
  otherCaCert: string;
}

/** A CA, a server certificate for 127.0.0.1/localhost and a client certificate, signed by it; and another CA. */
export function makePki(dir: string): Pki {
  mkdirSync(dir, { recursive: true });
  const f = (n: string) => join(dir, n);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  const ca = (name: string) => {
    ssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', `/CN=${name}`, '-keyout', f(`${name}.key`), '-out', f(`${name}.crt`));
  };
  ca('test-ca');
  ca('other-ca');
  const leaf = (name: string, ext: string) => {
    ssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=${name}`, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`));
    writeFileSync(f(`${name}.ext`), ext);
    ssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('test-ca.crt'), '-CAkey', f('test-ca.key'), '-CAcreateserial', '-days', '2', '-extfile', f(`${name}.ext`), '-out', f(`${name}.crt`));
  };
  leaf('server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n');
  leaf('client', 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n');
  return {
    dir,
    caCert: f('test-ca.crt'),
    serverCert: f('server.crt'),
    serverKey: f('server.key'),
    clientCert: f('client.crt'),
    clientKey: f('client.key'),
    otherCaCert: f('other-ca.crt'),
  };
}

/**
 * TLS (with ALPN h2, as gRPC clients ask) in front of a plaintext gRPC server at `target`. With
 * `clientCa`, a client certificate signed by it is required (mutual TLS).
 */
export async function startTlsTerminator(target: string, pki: Pki, opts: { requireClientCert?: boolean } = {}): Promise<Proxy> {
  const t = hostPort(target);
  const open = new Set<Socket>();
  const server = createTlsServer(
    {
      key: readFileSync(pki.serverKey),
      cert: readFileSync(pki.serverCert),
      ALPNProtocols: ['h2'],
      ...(opts.requireClientCert ? { ca: readFileSync(pki.caCert), requestCert: true, rejectUnauthorized: true } : {}),
    },
    (client) => pipeTo(client, t, open),
  );
  server.on('tlsClientError', () => undefined);
  const p = await listen(server as unknown as Server);
  return { address: `127.0.0.1:${p}`, port: p, ...controls(server as unknown as Server, p, open) };
}

/**
 * A gRPC frontend that asks for an API key: TLS in front of the plaintext server at `target`, each
 * call forwarded only with `authorization: Bearer <apiKey>`, answered UNAUTHENTICATED otherwise
 * (as Temporal Cloud does), with the call's trailers passed back. `forbid`: the methods (their
 * paths, `/temporal.api.operatorservice.v1.OperatorService/AddSearchAttributes`) the key may not
 * call, answered PERMISSION_DENIED, as Temporal Cloud answers an account without the right.
 */
export async function startApiKeyGateway(target: string, pki: Pki, apiKey: string, opts: { forbid?: RegExp } = {}): Promise<Proxy & { refused: () => number }> {
  let upstream: ClientHttp2Session | null = null;
  const session = () => {
    if (!upstream || upstream.closed || upstream.destroyed) upstream = http2Connect(`http://${target}`);
    return upstream;
  };
  let refused = 0;
  // The compatibility API: it sends the trailers added before the end.
  const server = createSecureServer({ key: readFileSync(pki.serverKey), cert: readFileSync(pki.serverCert), allowHTTP1: false }, (req, res) => {
    if (req.headers.authorization !== `Bearer ${apiKey}`) {
      refused++;
      res.writeHead(200, { 'content-type': 'application/grpc', 'grpc-status': '16', 'grpc-message': 'Request unauthorized.' });
      res.end();
      return;
    }
    if (opts.forbid?.test(String(req.headers[':path'] ?? ''))) {
      res.writeHead(200, { 'content-type': 'application/grpc', 'grpc-status': '7', 'grpc-message': 'Request unauthorized: this API key may not do this.' });
      res.end();
      return;
    }
    const forward: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && k !== ':authority' && k !== ':scheme') forward[k] = v as string | string[];
    const up = session().request(forward);
    up.on('response', (h) => {
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(h)) if (v !== undefined && !k.startsWith(':')) out[k] = v as string | string[];
      res.writeHead(Number(h[':status'] ?? 200), out);
    });
    up.on('data', (d) => res.write(d));
    up.on('trailers', (t) => {
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(t)) if (v !== undefined) out[k] = String(v);
      res.addTrailers(out);
    });
    up.on('end', () => res.end());
    up.on('error', () => res.stream.close(h2.NGHTTP2_INTERNAL_ERROR));
    req.on('data', (d) => up.write(d));
    req.on('end', () => up.end());
    req.on('error', () => up.close(h2.NGHTTP2_CANCEL));
  });
  server.on('sessionError', () => undefined);
  const port = await listen(server as unknown as Server);
  const open = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  const c = controls(server as unknown as Server, port, open);
  return {
    address: `127.0.0.1:${port}`,
    port,
    ...c,
    close: async () => {
      upstream?.close();
      await c.close();
    },
    refused: () => refused,
  };
}
