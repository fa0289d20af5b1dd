// e2e `network-policy` (issue 12, item 5): the operator renders a NetworkPolicy per cluster, and
// the test bed enforces it on the brokers: the raft port from the cluster's own pods only, the
// broker port from them, the operator's namespace and pods labelled queenmq.com/client=true in
// any namespace. The cluster works behind it (the operator reaches every broker, the voters reach
// each other); a client pod with the label gets its pushes acknowledged, one without it gets no
// answer, and no pod outside the cluster reaches the raft port. Turned off in the spec, the
// policy goes, and everyone gets in again.
import { request } from 'node:http';
import { afterEach, expect, it } from 'vitest';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { applyManifest } from '../testbed/client.ts';
import { formed, kubectl, patchSpec, pods, scenario, seedSpec, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
const extra: string[] = [];
afterEach(async () => {
  await s?.close();
  s = null;
  for (const ns of extra.splice(0)) await kubectl(['delete', 'namespace', ns, '--wait=false']);
});

/** A request from a chosen source address: the HTTP status, or 'timeout'. */
function from(source: string, ip: string, port: number, path: string, timeoutMs = 2000): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request({ host: ip, port, path, method: port === 7400 ? 'POST' : 'GET', localAddress: source, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.setTimeout(timeoutMs, () => {
      req.destroy();
      resolve('timeout');
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    req.end();
  });
}

async function clientPod(sc: Scenario, ns: string, name: string, labels: Record<string, string>): Promise<string> {
  const r = await applyManifest(
    `apiVersion: v1
kind: Pod
metadata: { name: ${name}, labels: ${JSON.stringify(labels)} }
spec:
  containers: [{ name: main, image: example.org/testbed-stand-in:1, env: [{ name: PORT, value: "8080" }] }]
`,
    ns,
  );
  if (r.code !== 0) throw new Error(r.stderr);
  return waitFor(`${ns}/${name} running with an address`, async () => {
    const p = await sc.core.readNamespacedPod({ namespace: ns, name });
    return p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? p.status?.podIP : undefined;
  }, 60_000);
}

it('network-policy: rendered per cluster and enforced: the cluster works behind it, labelled clients get in, others do not', async () => {
  s = await scenario('netpol');
  await formed(s, seedSpec());
  const np = JSON.parse((await kubectl(['-n', s.ns, 'get', 'networkpolicy', 'queen', '-o', 'json'])).stdout);
  expect(np.metadata.ownerReferences[0]).toMatchObject({ kind: 'QueenCluster', name: 'queen', controller: true });
  expect(np.spec.ingress).toEqual([
    { from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/instance': 'queen', 'app.kubernetes.io/name': 'queen' } } }], ports: [{ port: 7400, protocol: 'TCP' }] },
    {
      from: [
        { podSelector: { matchLabels: { 'app.kubernetes.io/instance': 'queen', 'app.kubernetes.io/name': 'queen' } } },
        { namespaceSelector: {}, podSelector: { matchLabels: { 'queenmq.com/client': 'true' } } },
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': s.ns } } },
      ],
      ports: [{ port: 6632, protocol: 'TCP' }],
    },
  ]);

  const elsewhere = `${s.ns}-x`;
  extra.push(elsewhere);
  expect((await kubectl(['create', 'namespace', elsewhere])).code).toBe(0);
  await waitFor('the default ServiceAccount', async () => (await kubectl(['-n', elsewhere, 'get', 'serviceaccount', 'default'])).code === 0, 30_000);
  const client = await clientPod(s, elsewhere, 'client', { 'queenmq.com/client': 'true' });
  const stranger = await clientPod(s, elsewhere, 'stranger', { app: 'other' });
  const ips = await voterIps(s);
  await waitFor('the policy enforced on every broker', async () => (await Promise.all(ips.map((ip) => from(stranger, ip, 6632, '/health', 1000)))).every((r) => r === 'timeout'), 30_000);
  for (const ip of ips) {
    expect(await from(client, ip, 6632, '/health')).toBe(200);
    expect(await from(client, ip, 7400, '/raft/v1/state')).toBe('timeout');
  }
  // Behind the policy the cluster goes on: the operator sees it Ready and committing.
  await waitForCluster(s, 'Ready and committing behind the policy', (q) => q.status?.phase === 'Ready' && q.status?.commits === true && (q.status?.members ?? []).every((m) => m.live), 60_000);
  const ok = startLoad({ kubeConfig: s.kc, namespace: s.ns, rate: 20, sourceIp: client });
  const refused = startLoad({ kubeConfig: s.kc, namespace: s.ns, rate: 5, sourceIp: stranger, attemptTimeoutMs: 1000, giveUpAfterMs: 3000 });
  await waitFor('pushes from the labelled client', async () => ok.progress().acknowledged >= 40, 60_000);
  const [okReport, refusedReport] = await Promise.all([ok.stop(), refused.stop()]);
  expect(okReport.failedAttempts).toEqual([]);
  expect(await verifyAcknowledged(okReport, ips)).toEqual([]);
  expect(refusedReport.acknowledged).toBe(0);

  // Turned off: the operator deletes it, and the stranger gets in.
  await patchSpec(s, { networkPolicy: { enabled: false } });
  await waitFor('the policy deleted', async () => (await kubectl(['-n', s!.ns, 'get', 'networkpolicy', 'queen'])).code !== 0, 120_000);
  await waitFor('the stranger let in', async () => (await from(stranger, ips[0]!, 6632, '/health', 1000)) === 200, 30_000);
  const after = await waitForCluster(s, 'Ready', (q) => q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'RollingUpgrade', 120_000);
  // Applying it restarted no pod.
  expect((await pods(s)).every((p) => (p.status?.containerStatuses?.[0]?.restartCount ?? 0) === 0)).toBe(true);
  expect(after.status?.lastOperation?.result).toBe('Succeeded');
});
