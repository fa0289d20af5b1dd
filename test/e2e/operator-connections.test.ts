// e2e `operator-connections`: the operator process against an API server and a Temporal frontend
// that do not answer, then do; behind TLS and mutual TLS. It waits for each (never a sandbox in
// its stead), says in its log which address failed and why, is not ready until both answer, and
// fails /healthz once its watches have been broken longer than --unhealthy-after; search attributes
// it may not register are used from the next operation on once a person adds them. These need a
// process controlled by hand (its kubeconfig and Temporal address point at proxies the test cuts).
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { freePorts } from '../testbed/ports.ts';
import { makePki, startApiKeyGateway, startTcpProxy, startTlsTerminator, type Pki, type Proxy } from '../testbed/proxies.ts';
import { createCluster, kubectl, operatorSetup, patchSpec, scenario, seedSpec, testbed, waitFor, waitForCluster, type OperatorProcess, type Scenario } from './harness.ts';

let s: Scenario;
const proxies: Proxy[] = [];
let pki: Pki;
beforeAll(async () => {
  s = await scenario('conn');
  pki = makePki(join(testbed().dir, 'operator', s.ns, 'pki'));
});
afterAll(async () => {
  await s?.close();
  await Promise.all(proxies.map((p) => p.close()));
});

async function get(port: number, path: string): Promise<{ status: number; body: string }> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(3000) });
    return { status: res.status, body: await res.text() };
  } catch (err) {
    return { status: 0, body: String(err) };
  }
}

/** The operator's ServiceAccount kubeconfig, its server replaced by `server`. */
function kubeconfigVia(server: string, name: string): string {
  const kc = parse(readFileSync(operatorSetup().kubeconfig, 'utf8'));
  for (const c of kc.clusters) c.cluster.server = server;
  const file = join(testbed().dir, 'operator', s.ns, `${name}.kubeconfig`);
  writeFileSync(file, stringify(kc), { mode: 0o600 });
  return file;
}

async function operator(label: string, extra: string[]): Promise<{ op: OperatorProcess; port: number }> {
  const [port] = await freePorts(1);
  const op = s.startOperator(label, { extra: [`--health-port=${port}`, '--bind-address=127.0.0.1', ...extra] });
  await waitFor(`${label} serving /healthz`, async () => (await get(port!, '/healthz')).status > 0, 30_000);
  return { op, port: port! };
}

const lines = (op: OperatorProcess, re: RegExp) => op.log().split('\n').filter((l) => re.test(l));

/** The Temporal CLI against the test bed's server (not through a proxy). */
function temporal(args: string[]): string {
  const r = spawnSync(join(testbed().tools.temporalBin, 'temporal'), [...args, '--address', testbed().temporal.address], { encoding: 'utf8' });
  expect(r.status, `temporal ${args.join(' ')}: ${r.stdout}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

describe('operator connections', () => {
  it('an API server that does not answer: waited for and named, not ready, no sandbox; broken watches fail /healthz after the grace', async () => {
    const api = await startTcpProxy(testbed().apiServer.replace(/^https:\/\//, ''));
    proxies.push(api);
    await api.cut();
    const { op, port } = await operator('api-down', [`--kubeconfig=${kubeconfigVia(`https://${api.address}`, 'via-proxy')}`, '--unhealthy-after=10s']);
    const failing = await waitFor('the log naming the API server', async () => lines(op, /reaching the Kubernetes API server at https:\/\/127\.0\.0\.1:\d+ failed/)[0], 30_000);
    expect(failing).toContain(`https://${api.address}`);
    expect(failing).toMatch(/connection refused.*trying again in \d+s/);
    const notReady = await get(port, '/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.body).toMatch(/\[-\]kubernetes failed: the API server has not answered yet/);
    // Alive while it waits: a restart would not help.
    expect((await get(port, '/healthz')).status).toBe(200);
    expect(op.log()).not.toMatch(/sandbox/i);

    await api.restore();
    await waitFor('ready once the API server answers', async () => (await get(port, '/readyz')).status === 200, 60_000);
    expect(lines(op, /reaching the Kubernetes API server .*: done after \d+ attempts/)).toHaveLength(1);

    // The API server goes away for longer than --unhealthy-after: the watches break, /healthz fails.
    const cutAt = Date.now();
    await api.cut();
    const unhealthy = await waitFor('/healthz failing', async () => {
      const h = await get(port, '/healthz');
      return h.status === 503 ? h : undefined;
    }, 60_000);
    expect(Date.now() - cutAt).toBeGreaterThanOrEqual(10_000);
    expect(unhealthy.body).toMatch(/\[-\]watches failed: broken for \d+s/);
    expect((await get(port, '/readyz')).status).toBe(503);
    await api.restore();
    await waitFor('healthy again', async () => (await get(port, '/healthz')).status === 200 && (await get(port, '/readyz')).status === 200, 90_000);
    // A broken watch is said once per outage, not once per retry.
    expect(lines(op, /the watch of QueenClusters in namespace .* broke/).length).toBeLessThanOrEqual(3);
    await op.kill('SIGTERM');
  });

  it('a Temporal frontend that does not answer: waited for and named, ready once it answers', async () => {
    const t = await startTcpProxy(testbed().temporal.address);
    proxies.push(t);
    await t.cut();
    const { op, port } = await operator('temporal-down', [`--temporal-address=${t.address}`]);
    const failing = await waitFor('the log naming the Temporal frontend', async () => lines(op, /connecting to the Temporal frontend at/)[0], 30_000);
    expect(failing).toContain(`connecting to the Temporal frontend at ${t.address} failed: connection refused`);
    expect(failing).not.toMatch(/tonic|transport::Error/);
    const notReady = await get(port, '/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.body).toContain(`[-]temporal failed: the Temporal frontend ${t.address} has not answered yet`);
    await t.restore();
    await waitFor('ready once Temporal answers', async () => (await get(port, '/readyz')).status === 200, 60_000);
    await op.kill('SIGTERM');
  });

  it('TLS: a cluster forms through a frontend that requires TLS; a wrong CA is said with the address', async () => {
    const tls = await startTlsTerminator(testbed().temporal.address, pki);
    proxies.push(tls);
    const wrong = await operator('tls-wrong-ca', [`--temporal-address=${tls.address}`, `--temporal-tls-ca=${pki.otherCaCert}`]);
    const said = await waitFor('the wrong CA said', async () => lines(wrong.op, /connecting to the Temporal frontend/)[0], 30_000);
    expect(said).toContain(`connecting to the Temporal frontend at ${tls.address} with TLS failed: its TLS certificate is not signed by the CA of --temporal-tls-ca (${pki.otherCaCert})`);
    expect((await get(wrong.port, '/readyz')).status).toBe(503);
    await wrong.op.kill('SIGTERM');

    const right = await operator('tls', [`--temporal-address=${tls.address}`, `--temporal-tls-ca=${pki.caCert}`]);
    await waitFor('ready through TLS', async () => (await get(right.port, '/readyz')).status === 200, 60_000);
    // The worker and the watcher work through it: a cluster forms.
    await createCluster(s, seedSpec({ replicas: 1 }), 'tls');
    await waitForCluster(s, 'formed through TLS', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 180_000, 'tls');
    await right.op.kill('SIGTERM');
  });

  it('mutual TLS: connects with the client certificate, and without one says what the frontend asks for', async () => {
    const mtls = await startTlsTerminator(testbed().temporal.address, pki, { requireClientCert: true });
    proxies.push(mtls);
    const without = await operator('mtls-none', [`--temporal-address=${mtls.address}`, `--temporal-tls-ca=${pki.caCert}`]);
    // (TLS 1.3 lets the handshake end before the frontend checks: a refusal or a broken connection;
    // an attempt cut before the frontend's alert arrives is only a "transport error", and the
    // next attempts, a second or two later, say what the frontend asks for.)
    const said = await waitFor('the refusal said', async () => lines(without.op, /connecting to the Temporal frontend/).find((l) => /client certificate/.test(l)), 30_000);
    expect(said).toContain(`connecting to the Temporal frontend at ${mtls.address} with TLS failed:`);
    expect(said).toMatch(/asks for a client certificate.*\(--temporal-tls-cert, --temporal-tls-key\)/);
    await without.op.kill('SIGTERM');
    const withCert = await operator('mtls', [`--temporal-address=${mtls.address}`, `--temporal-tls-ca=${pki.caCert}`, `--temporal-tls-cert=${pki.clientCert}`, `--temporal-tls-key=${pki.clientKey}`]);
    await waitFor('ready through mutual TLS', async () => (await get(withCert.port, '/readyz')).status === 200, 60_000);
    await withCert.op.kill('SIGTERM');
  });

  it("install.yaml's TLS lines uncommented as docs/temporal.md says: the installed operator reaches a frontend that requires mutual TLS with the Secret temporal-client", async () => {
    const mtls = await startTlsTerminator(testbed().temporal.address, pki, { requireClientCert: true });
    proxies.push(mtls);
    // docs/temporal.md's command, with the test bed's PKI files.
    const secret = await kubectl(['-n', s.ns, 'create', 'secret', 'generic', 'temporal-client', `--from-file=ca.crt=${pki.caCert}`, `--from-file=tls.crt=${pki.clientCert}`, `--from-file=tls.key=${pki.clientKey}`]);
    expect(secret.code, secret.stderr).toBe(0);
    // Ready (through /readyz) only once it reached Temporal, which refuses a connection without the client certificate.
    const installed = await s.install({}, { env: { TEMPORAL_ADDRESS: mtls.address }, uncomment: /TEMPORAL_TLS_|temporal-tls|secretName: temporal-client/ });
    const [pod] = await installed.pods(s.core);
    const env = Object.fromEntries((pod!.spec!.containers[0]!.env ?? []).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ TEMPORAL_TLS_CA: '/etc/temporal-tls/ca.crt', TEMPORAL_TLS_CERT: '/etc/temporal-tls/tls.crt', TEMPORAL_TLS_KEY: '/etc/temporal-tls/tls.key' });
    expect(pod!.spec!.volumes).toContainEqual(expect.objectContaining({ name: 'temporal-tls', secret: expect.objectContaining({ secretName: 'temporal-client' }) }));
    // It watches this namespace: left running, it would act on the next test's cluster beside that test's operator.
    await s.uninstall();
  });

  it('an API key: a frontend that asks for one refuses a wrong one in words, takes the right one from TEMPORAL_API_KEY', async () => {
    const gateway = await startApiKeyGateway(testbed().temporal.address, pki, 'the-right-key');
    proxies.push(gateway);
    const keyFile = join(testbed().dir, 'operator', s.ns, 'api-key');
    writeFileSync(keyFile, 'a-wrong-key\n', { mode: 0o600 });
    const wrong = await operator('apikey-wrong', [`--temporal-address=${gateway.address}`, `--temporal-tls-ca=${pki.caCert}`, `--temporal-api-key-file=${keyFile}`]);
    const said = await waitFor('the refused key said', async () => lines(wrong.op, /connecting to the Temporal frontend/)[0], 30_000);
    expect(said).toContain(`connecting to the Temporal frontend at ${gateway.address} with TLS failed: it refused the API key`);
    expect(gateway.refused()).toBeGreaterThan(0);
    await wrong.op.kill('SIGTERM');

    const [port] = await freePorts(1);
    const right = s.startOperator('apikey', {
      extra: [`--health-port=${port}`, '--bind-address=127.0.0.1', `--temporal-address=${gateway.address}`, `--temporal-tls-ca=${pki.caCert}`],
      env: { TEMPORAL_API_KEY: 'the-right-key' },
    });
    await waitFor('ready with the API key', async () => (await get(port!, '/readyz')).status === 200, 60_000);
    await right.kill('SIGTERM');
  });

  it('search attributes it may not register, added later by a person, are used from then on without a restart', async () => {
    // A Temporal namespace of its own (the test bed's default has them), behind a frontend whose
    // API key may not register search attributes, as Temporal Cloud's may not.
    const tns = `attrs-${s.ns}`;
    temporal(['operator', 'namespace', 'create', '--namespace', tns]);
    const gateway = await startApiKeyGateway(testbed().temporal.address, pki, 'the-key', { forbid: /OperatorService\/AddSearchAttributes$/ });
    proxies.push(gateway);
    const op = s.startOperator('attrs', {
      extra: [`--temporal-address=${gateway.address}`, `--temporal-tls-ca=${pki.caCert}`, `--temporal-namespace=${tns}`],
      env: { TEMPORAL_API_KEY: 'the-key' },
    });
    await waitFor('the refusal said', async () => lines(op, /could not register the search attributes QueenNamespace/)[0], 60_000);
    await createCluster(s, seedSpec({ replicas: 1 }), 'attrs');
    await waitForCluster(s, 'formed without the attributes', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 180_000, 'attrs');
    // A person adds them (here with the CLI; in Temporal Cloud its console or tcld).
    temporal(['operator', 'search-attribute', 'create', '--namespace', tns, ...['QueenNamespace', 'QueenCluster', 'QueenOperation', 'QueenTarget'].flatMap((n) => ['--name', n, '--type', 'Keyword'])]);
    await waitFor('the operator seeing them', async () => lines(op, new RegExp(`search attributes are registered in Temporal namespace ${tns} now`))[0], 60_000);
    // The next operation carries them: the Web UI's query finds it.
    await patchSpec(s, { version: '2.6.1' }, 'attrs');
    await waitForCluster(s, 'upgraded', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 180_000, 'attrs');
    // Temporal's visibility store is written after the history, a moment later under load.
    const query = `QueenNamespace = "${s.ns}" AND QueenCluster = "attrs" AND QueenOperation = "RollingUpgrade"`;
    const found = () => (JSON.parse(temporal(['workflow', 'list', '--namespace', tns, '--query', query, '-o', 'json']) || '[]') as Array<{ execution: { workflowId: string } }>).map((w) => w.execution.workflowId);
    await waitFor('the upgrade found by its search attributes', async () => found().length > 0, 30_000);
    expect(found()).toEqual([`queencluster/${s.ns}/attrs`]);
    expect(lines(op, /could not register the search attributes/)).toHaveLength(1);
    await op.kill('SIGTERM');
  });
});
