// The pod network (issue 12, items 2 and 5): NetworkPolicies are enforced on the simulated Queen
// pods (a source a policy does not let in gets no answer, as dropped packets give none), and two
// pods can be cut from each other. The policy here is the shape the operator renders: the raft
// port from the cluster's own pods only, the broker port from a chosen namespace and from pods
// labelled as clients.
import { afterAll, expect, it } from 'vitest';
import { checkSeedCluster, getJson, isReady, listPods, membership, sendJson, until } from './checks.ts';
import { connect, control } from './client.ts';
import { startLoad } from './load.ts';
import { requestFrom } from './request-from.ts';

const client = connect();
const namespaces: string[] = [];

afterAll(async () => {
  for (const ns of namespaces) await client.deleteNamespace(ns);
});

/** A pod that stands for a client (it only needs an address of its own). */
async function clientPod(ns: string, name: string, labels: Record<string, string>): Promise<string> {
  const r = await client.applyManifest(
    `apiVersion: v1
kind: Pod
metadata: { name: ${name}, labels: ${JSON.stringify(labels)} }
spec:
  containers: [{ name: main, image: example.org/testbed-stand-in:1, env: [{ name: PORT, value: "8080" }] }]
`,
    ns,
  );
  if (r.code !== 0) throw new Error(r.stderr);
  const pod = await until(`${name} running`, async () => {
    const p = (await listPods(client, ns, '')).find((x) => x.metadata.name === name);
    return p && isReady(p) && p.status?.podIP ? p : undefined;
  }, 60_000);
  return pod.status.podIP;
}

it('a NetworkPolicy is enforced on the Queen pods: raft from the cluster only, the broker port from a namespace and from labelled clients', async () => {
  const ns = await client.newNamespace('netpol');
  const other = await client.newNamespace('netpol-ops');
  namespaces.push(ns, other);
  await checkSeedCluster(client, ns);
  const labelled = await clientPod(ns, 'client', { 'queenmq.com/client': 'true' });
  const stranger = await clientPod(ns, 'stranger', { app: 'other' });
  const operator = await clientPod(other, 'operator', { app: 'operator' });
  const pods = await listPods(client, ns, 'app=queen');
  const ip0 = pods[0]!.status.podIP as string;

  // Before any policy, everyone gets in.
  expect(await requestFrom(stranger, ip0, 6632, '/health')).toBe(200);
  expect(await requestFrom(stranger, ip0, 7400, '/raft/v1/state')).toBe(401); // answered (no raft token)

  const policy = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'queen' },
    spec: {
      podSelector: { matchLabels: { app: 'queen' } },
      policyTypes: ['Ingress'],
      ingress: [
        { from: [{ podSelector: { matchLabels: { app: 'queen' } } }], ports: [{ port: 'raft' }, { port: 'http' }] },
        {
          from: [
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': other } } },
            { namespaceSelector: {}, podSelector: { matchLabels: { 'queenmq.com/client': 'true' } } },
          ],
          ports: [{ port: 6632 }],
        },
      ],
    },
  };
  const applied = await client.applyManifest(JSON.stringify(policy), ns);
  expect(applied.code).toBe(0);
  // The test bed's network follows the policies through a watch: the rules come a moment after the apply.
  await until('the rules of the policy computed for queen-0', async () => (await control.networkRules(ns, 'queen-0')).refuse?.['6632']?.includes(stranger) ?? false, 10_000);
  await until('the policy reaches the simulators', async () => {
    const infos = await Promise.all(pods.map((p) => getJson(`http://${p.status.podIP}:6632/_sim/info`)));
    return infos.every((i) => i.body.net?.refuse?.['6632']?.includes(stranger));
  }, 10_000);

  expect(await requestFrom(stranger, ip0, 6632, '/health')).toBe('timeout');
  expect(await requestFrom(stranger, ip0, 7400, '/raft/v1/state')).toBe('timeout');
  expect(await requestFrom(labelled, ip0, 6632, '/health')).toBe(200);
  expect(await requestFrom(labelled, ip0, 7400, '/raft/v1/state')).toBe('timeout');
  expect(await requestFrom(operator, ip0, 6632, '/api/v1/system/raft/membership')).toBe(200);
  // This machine (the kubelet's probes, the test itself) is the node's: let in, as most plugins do.
  expect(await requestFrom('127.0.0.1', ip0, 6632, '/health')).toBe(200);
  // The cluster itself goes on: peers reach each other, writes commit, pods stay Ready.
  const view = await membership(ip0);
  expect(view.members.every((m) => m.live)).toBe(true);
  const put = await sendJson('PUT', `http://${ip0}:6632/api/v1/kv/test/x`, { value: 1, ttlSeconds: 60 });
  expect(put.status).toBe(200);

  // A client pushing from the labelled pod gets through; from the stranger, nothing comes back.
  const ok = startLoad({ kubeConfig: client.kubeConfig(), namespace: ns, rate: 20, sourceIp: labelled });
  const blocked = startLoad({ kubeConfig: client.kubeConfig(), namespace: ns, rate: 5, sourceIp: stranger, attemptTimeoutMs: 1000, giveUpAfterMs: 3000 });
  await until('pushes from the client', async () => ok.progress().acknowledged >= 20, 30_000);
  const [okReport, blockedReport] = await Promise.all([ok.stop(), blocked.stop()]);
  expect(okReport.failedAttempts).toEqual([]);
  expect(blockedReport.acknowledged).toBe(0);
  expect(blockedReport.failedAttempts.every((f) => f.reason.startsWith('timeout'))).toBe(true);

  // The policy removed: everyone again.
  expect((await client.kubectl(['-n', ns, 'delete', 'networkpolicy', 'queen'])).code).toBe(0);
  await until('the policy gone from the pods', async () => (await requestFrom(stranger, ip0, 6632, '/health', 1000)) === 200, 10_000);
});

it('two pods cut from each other: the leader no longer hears the cut follower, which settles; healed, it is back', async () => {
  const ns = await client.newNamespace('partition');
  namespaces.push(ns);
  const r = await checkSeedCluster(client, ns);
  const leader = r.leader!;
  const follower = [1, 2, 3].find((id) => id !== leader)!;
  const lip = r.pods[leader - 1]!.ip;
  const fip = r.pods[follower - 1]!.ip;
  await control.partition(`${ns}/queen-${leader - 1}`, `${ns}/queen-${follower - 1}`);
  await until('the follower not live on the leader', async () => (await membership(lip)).members.find((m) => m.nodeId === follower)?.live === false, 30_000);
  await until('the follower settles (503)', async () => (await getJson(`http://${fip}:6632/health`)).status === 503, 30_000);
  const put = await sendJson('PUT', `http://${lip}:6632/api/v1/kv/test/y`, { value: 1, ttlSeconds: 60 });
  expect(put.status).toBe(200);
  await control.partition(`${ns}/queen-${leader - 1}`, `${ns}/queen-${follower - 1}`, false);
  await until('the follower live and healthy again', async () => {
    const m = (await membership(lip)).members.find((x) => x.nodeId === follower);
    return m?.live === true && (await getJson(`http://${fip}:6632/health`)).status === 200;
  }, 30_000);
});
