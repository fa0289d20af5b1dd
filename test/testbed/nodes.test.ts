// Nodes that die (issue 12, item 2). A node that stops takes its pods off the network (raft and
// HTTP: the cluster sees that voter go silent, while its process still runs); a pod deleted there
// stays Terminating; deleted by force, its successor cannot use the volume, which stays attached
// to the dead node (Multi-Attach, from the real attach/detach controller), until the node is shut
// down and marked out of service. Evictions honour the disruption budget, and kubectl drain works.
import { afterAll, expect, it } from 'vitest';
import { checkSeedCluster, getJson, isReady, listPods, membership, sendJson, until } from './checks.ts';
import { connect, control } from './client.ts';

const client = connect();
const namespaces: string[] = [];
const cleanups: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  for (const ns of namespaces) await client.deleteNamespace(ns);
});

async function events(ns: string, pod: string): Promise<{ reason: string; message: string }[]> {
  const list = await client.kube().get<any>(`/api/v1/namespaces/${ns}/events`, { query: { fieldSelector: `involvedObject.name=${pod}` } });
  return list.items.map((e: any) => ({ reason: e.reason, message: e.message }));
}

it('a node that stops: its voter goes silent though it runs, a deleted pod stays Terminating, its volume stays attached until the node is shut down and out of service', async () => {
  const ns = await client.newNamespace('deadnode');
  namespaces.push(ns);
  const r = await checkSeedCluster(client, ns);
  const leader = r.leader!;
  const victim = r.pods.find((p) => p.name !== `queen-${leader - 1}`)!;
  const nodeId = Number(victim.name.split('-')[1]) + 1;
  const lip = r.pods[leader - 1]!.ip;
  const node = victim.node;
  const before = await sendJson('PUT', `http://${lip}:6632/api/v1/kv/test/before`, { value: 'kept', forever: true });
  expect(before.status).toBe(200);

  await control.stopNode(node);
  cleanups.push(() => control.startNode(node));
  // Cut off: the leader stops hearing from it, it answers nobody, yet its process runs.
  await until('the voter on the dead node not live', async () => (await membership(lip)).members.find((m) => m.nodeId === nodeId)?.live === false, 30_000);
  await expect(getJson(`http://${victim.ip}:6632/health`, 1500)).rejects.toThrow();
  expect((await control.pod(ns, victim.name)).running).toBe(true);
  const writes = await sendJson('PUT', `http://${lip}:6632/api/v1/kv/test/during`, { value: 1, ttlSeconds: 600 });
  expect(writes.status).toBe(200);

  // Deleted, it stays Terminating: no kubelet there finishes it.
  const uid = (await listPods(client, ns, 'app=queen')).find((p) => p.metadata.name === victim.name)!.metadata.uid;
  expect((await client.kubectl(['-n', ns, 'delete', 'pod', victim.name, '--wait=false'])).code).toBe(0);
  await new Promise((res) => setTimeout(res, 5000));
  const stuck = (await listPods(client, ns, 'app=queen')).find((p) => p.metadata.name === victim.name)!;
  expect(stuck.metadata.uid).toBe(uid);
  expect(stuck.metadata.deletionTimestamp).toBeTruthy();

  // Deleted by force (and the node cordoned, as a person would): the successor lands elsewhere and
  // waits for the volume, still attached to the dead node.
  expect((await client.kubectl(['cordon', node])).code).toBe(0);
  cleanups.push(() => client.kubectl(['uncordon', node]));
  expect((await client.kubectl(['-n', ns, 'delete', 'pod', victim.name, '--grace-period=0', '--force'])).code).toBe(0);
  const successor = await until('the successor scheduled', async () => {
    const p = (await listPods(client, ns, 'app=queen')).find((x) => x.metadata.name === victim.name);
    return p && p.metadata.uid !== uid && p.spec.nodeName ? p : undefined;
  }, 60_000);
  expect(successor.spec.nodeName).not.toBe(node);
  await until('a Multi-Attach error on the successor', async () => (await events(ns, victim.name)).some((e) => e.reason === 'FailedAttachVolume' && /Multi-Attach error/.test(e.message)), 60_000);
  const vas = await client.kube().get<any>('/apis/storage.k8s.io/v1/volumeattachments');
  const claim = await client.kube().get<any>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/data-${victim.name}`);
  const va = vas.items.find((v: any) => v.spec.source.persistentVolumeName === claim.spec.volumeName && v.spec.nodeName === node);
  expect(va?.status?.attached).toBe(true);
  const pending = (await listPods(client, ns, 'app=queen')).find((x) => x.metadata.name === victim.name)!;
  expect(pending.status.phase).toBe('Pending');
  expect((await control.pod(ns, victim.name)).running).toBe(false); // the successor has not started
  // The old process on the dead node still runs, off the network.
  expect((await control.pods()).some((p) => p.uid === uid && p.running)).toBe(true);

  // The machine is shut down and marked out of service: the volume is detached and follows the pod.
  await control.stopNode(node, { shutdown: true });
  expect((await client.kubectl(['taint', 'node', node, 'node.kubernetes.io/out-of-service=nodeshutdown:NoExecute'])).code).toBe(0);
  cleanups.push(() => client.kubectl(['taint', 'node', node, 'node.kubernetes.io/out-of-service-']));
  const running = await until('the successor Ready on the same volume', async () => {
    const p = (await listPods(client, ns, 'app=queen')).find((x) => x.metadata.name === victim.name);
    return p && p.metadata.uid !== uid && isReady(p) ? p : undefined;
  }, 180_000);
  // Its data came along: the write from before is there, and it caught up with the one made without it.
  await until('the node back in the cluster, live and caught up', async () => {
    const m = (await membership(lip)).members.find((x) => x.nodeId === nodeId);
    return m?.live === true && m.lag === 0;
  }, 60_000);
  const kept = await getJson(`http://${running.status.podIP}:6632/api/v1/kv/test/before`);
  expect(kept.body).toMatchObject({ found: true, value: 'kept' });
  const info = await getJson(`http://${running.status.podIP}:6632/_sim/info`);
  expect(info.body.applied).toBeGreaterThan(3);
});

it('an eviction honours the disruption budget; kubectl drain evicts one pod at a time and finishes', async () => {
  const ns = await client.newNamespace('evict');
  namespaces.push(ns);
  const r = await checkSeedCluster(client, ns);
  const evict = (pod: string) =>
    client.kube().req('POST', `/api/v1/namespaces/${ns}/pods/${pod}/eviction`, { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod, namespace: ns } }).then(
      () => 201,
      (e: any) => e.status ?? 0,
    );
  // One pod down: the budget (maxUnavailable 1) allows no eviction of another.
  await control.kill(ns, 'queen-0', { hold: true });
  await until('queen-0 not Ready', async () => !isReady((await listPods(client, ns, 'app=queen'))[0]!), 60_000);
  await until('the budget allows nothing', async () => (await client.kube().get<any>(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets/queen`)).status?.disruptionsAllowed === 0, 30_000);
  expect(await evict('queen-1')).toBe(429);
  await control.release(ns, 'queen-0');
  await until('the budget allows one', async () => (await client.kube().get<any>(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets/queen`)).status?.disruptionsAllowed === 1, 60_000);

  // An eviction is counted by the budget at once: another one right after it is refused, before
  // any controller has seen the first pod go (a plain delete is counted only once the disruption
  // controller sees it, which is why the operator restarts pods with evictions).
  expect(await evict('queen-2')).toBe(201);
  expect(await evict('queen-1')).toBe(429);
  await until('queen-2 back and the budget allows one', async () => {
    const ps = await listPods(client, ns, 'app=queen');
    const pdb = await client.kube().get<any>(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets/queen`);
    return ps.length === 3 && ps.every((p) => isReady(p) && !p.metadata.deletionTimestamp) && pdb.status?.disruptionsAllowed === 1;
  }, 120_000);

  const node = r.pods[1]!.node;
  const drain = await client.kubectl(['drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=180s'], { timeoutMs: 200_000 });
  cleanups.push(() => client.kubectl(['uncordon', node]));
  expect(drain.code).toBe(0);
  expect(drain.stdout).toContain(`pod/queen-1 evicted`);
  const after = await until('three Ready pods again, none on the drained node', async () => {
    const ps = await listPods(client, ns, 'app=queen');
    return ps.length === 3 && ps.every((p) => isReady(p) && !p.metadata.deletionTimestamp) && ps.every((p) => p.spec.nodeName !== node) ? ps : undefined;
  }, 180_000);
  expect(after.map((p) => p.metadata.name)).toEqual(['queen-0', 'queen-1', 'queen-2']);
});
