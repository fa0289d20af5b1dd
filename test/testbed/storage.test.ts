// Check (d): the API server refuses to grow a claim of the fixed class, with the message users
// see; a claim of the expandable class grows; a share of growths waits for a pod restart
// (FileSystemResizePending); a claim outlives its pod until pvc-protection lets it go, and
// deleting it deletes the data.
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { getJson, sendJson, until } from './checks.ts';
import { connect, control } from './client.ts';

const client = connect();
const namespaces: string[] = [];

afterAll(async () => {
  for (const ns of namespaces) await client.deleteNamespace(ns);
});

async function namespace(prefix: string): Promise<string> {
  const ns = await client.newNamespace(prefix);
  namespaces.push(ns);
  return ns;
}

const claim = (name: string, size: string, storageClass?: string) => `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: ${name} }
spec:
  accessModes: [ReadWriteOnce]
  ${storageClass ? `storageClassName: ${storageClass}` : ''}
  resources: { requests: { storage: ${size} } }
`;

async function boundClaim(ns: string, name: string): Promise<any> {
  return until(`claim ${ns}/${name} Bound`, async () => {
    const pvc = await client.kube().getOrNull<any>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/${name}`);
    return pvc?.status?.phase === 'Bound' ? pvc : undefined;
  }, 30_000);
}

/** A pod named user that mounts the claim `data`. */
const userPod = (graceSeconds = 1) => `
apiVersion: v1
kind: Pod
metadata: { name: user }
spec:
  terminationGracePeriodSeconds: ${graceSeconds}
  containers:
    - name: main
      image: busybox:1.36
      volumeMounts: [{ name: data, mountPath: /data }]
  volumes: [{ name: data, persistentVolumeClaim: { claimName: data } }]
`;
const pvcPath = (ns: string, name: string) => `/api/v1/namespaces/${ns}/persistentvolumeclaims/${name}`;
const grow = (ns: string, name: string, size: string) =>
  client.kubectl(['-n', ns, 'patch', 'pvc', name, '-p', JSON.stringify({ spec: { resources: { requests: { storage: size } } } })]);

it('refuses to grow a claim of the fixed class, and grows one of the expandable class', async () => {
  const ns = await namespace('storage-d');
  expect((await client.applyManifest(claim('data-queen-0', '1Gi', 'queen-fixed'), ns)).code).toBe(0);
  await boundClaim(ns, 'data-queen-0');
  const refused = await grow(ns, 'data-queen-0', '2Gi');
  expect(refused.code).not.toBe(0);
  expect(refused.stderr).toContain(
    'persistentvolumeclaims "data-queen-0" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize',
  );
  expect((await client.kube().get<any>(pvcPath(ns, 'data-queen-0'))).status.capacity.storage).toBe('1Gi');

  // No class named: the default class, which can grow.
  expect((await client.applyManifest(claim('data-queen-1', '1Gi'), ns)).code).toBe(0);
  const before = await boundClaim(ns, 'data-queen-1');
  expect(before.spec.storageClassName).toBe('queen-expandable');
  const grown = await grow(ns, 'data-queen-1', '3Gi');
  expect(grown.stderr).toBe('');
  expect(grown.code).toBe(0);
  const after = await until('the claim grown to 3Gi', async () => {
    const pvc = await client.kube().get<any>(pvcPath(ns, 'data-queen-1'));
    return pvc.status?.capacity?.storage === '3Gi' ? pvc : undefined;
  }, 30_000);
  expect((after.status.conditions ?? []).map((c: any) => c.type)).not.toContain('FileSystemResizePending');
  const pv = await client.kube().get<any>(`/api/v1/persistentvolumes/${after.spec.volumeName}`);
  expect(pv.spec.capacity.storage).toBe('3Gi');
});

it('a growth that needs the node leaves FileSystemResizePending until a pod mounting the claim starts', async () => {
  const ns = await namespace('resize-pending');
  await client.control.setResizePendingShare(1, ns);
  expect((await client.applyManifest(claim('data', '1Gi'), ns)).code).toBe(0);
  await boundClaim(ns, 'data');
  expect((await grow(ns, 'data', '2Gi')).code).toBe(0);
  const pending = await until('FileSystemResizePending', async () => {
    const pvc = await client.kube().get<any>(pvcPath(ns, 'data'));
    return (pvc.status?.conditions ?? []).some((c: any) => c.type === 'FileSystemResizePending' && c.status === 'True') ? pvc : undefined;
  }, 30_000);
  expect(pending.status.capacity.storage).toBe('1Gi');
  expect(pending.status.allocatedResources.storage).toBe('2Gi');
  expect((await client.kube().get<any>(`/api/v1/persistentvolumes/${pending.spec.volumeName}`)).spec.capacity.storage).toBe('2Gi');

  expect((await client.applyManifest(userPod(), ns)).code).toBe(0);
  const done = await until('the claim at 2Gi once the pod started', async () => {
    const pvc = await client.kube().get<any>(pvcPath(ns, 'data'));
    return pvc.status?.capacity?.storage === '2Gi' ? pvc : undefined;
  }, 30_000);
  expect((done.status.conditions ?? []).map((c: any) => c.type)).not.toContain('FileSystemResizePending');
  // The kubelet finishes the growth as it mounts the volume, before the container starts: the pod's
  // Running follows, in a status write of its own.
  const p = await until('the pod running', async () => {
    const pod = await client.kube().get<any>(`/api/v1/namespaces/${ns}/pods/user`);
    return pod.status?.phase === 'Running' ? pod : undefined;
  }, 30_000);
  expect(p.status.containerStatuses?.[0]?.state?.running).toBeTruthy();
});

it('a mounted volume whose file system waits for its pod: the node says it cannot grow it (NodeResizeError) until the pod starts again', async () => {
  const ns = await namespace('resize-mounted');
  await client.control.setResizePendingShare(1, ns);
  expect((await client.applyManifest(claim('data', '1Gi'), ns)).code).toBe(0);
  await boundClaim(ns, 'data');
  expect((await client.applyManifest(userPod(), ns)).code).toBe(0);
  await until('the pod Running', async () => (await client.kube().get<any>(`/api/v1/namespaces/${ns}/pods/user`)).status?.phase === 'Running', 30_000);
  expect((await grow(ns, 'data', '2Gi')).code).toBe(0);
  const failed = await until('NodeResizeError beside FileSystemResizePending', async () => {
    const pvc = await client.kube().get<any>(pvcPath(ns, 'data'));
    const types = (pvc.status?.conditions ?? []).filter((c: any) => c.status === 'True').map((c: any) => c.type);
    return types.includes('NodeResizeError') && types.includes('FileSystemResizePending') ? pvc : undefined;
  }, 30_000);
  expect(failed.status.capacity.storage).toBe('1Gi');
  expect(failed.status.conditions.find((c: any) => c.type === 'NodeResizeError').message).toMatch(/FailedPrecondition/);
  const warnings = await until('the kubelet\'s Warning', async () => {
    const list = await client.kube().get<any>(`/api/v1/namespaces/${ns}/events`);
    const found = list.items.filter((e: any) => e.reason === 'FileSystemResizeFailed' && e.involvedObject?.name === 'data');
    return found.length > 0 ? found : undefined;
  }, 30_000);
  expect(warnings[0].type).toBe('Warning');

  expect((await client.kubectl(['-n', ns, 'delete', 'pod', 'user', '--wait=true'])).code).toBe(0);
  expect((await client.applyManifest(userPod(), ns)).code).toBe(0);
  const done = await until('the claim at 2Gi once the pod started again', async () => {
    const pvc = await client.kube().get<any>(pvcPath(ns, 'data'));
    return pvc.status?.capacity?.storage === '2Gi' ? pvc : undefined;
  }, 30_000);
  expect((done.status.conditions ?? []).map((c: any) => c.type)).toEqual([]);
});

it('a claim outlives its pod until pvc-protection lets it go; deleting it deletes the data', async () => {
  const ns = await namespace('storage-delete');
  expect((await client.applyManifest(claim('data', '1Gi'), ns)).code).toBe(0);
  const pvc = await boundClaim(ns, 'data');
  const pv = await client.kube().get<any>(`/api/v1/persistentvolumes/${pvc.spec.volumeName}`);
  const folder: string = pv.spec.csi.volumeAttributes.path;
  expect(existsSync(folder)).toBe(true);
  expect((await client.applyManifest(userPod(2), ns)).code).toBe(0);
  await until('the pod Running', async () => (await client.kube().get<any>(`/api/v1/namespaces/${ns}/pods/user`)).status?.phase === 'Running', 30_000);
  const info = await client.control.pod(ns, 'user');
  expect(info.volumes.data).toBe(folder);
  writeFileSync(join(folder, 'payload'), 'data the node wrote');

  // The claim is deleted while the pod uses it: it stays (Terminating) with its data.
  expect((await client.kubectl(['-n', ns, 'delete', 'pvc', 'data', '--wait=false'])).code).toBe(0);
  const terminating = await client.kube().get<any>(pvcPath(ns, 'data'));
  expect(terminating.metadata.deletionTimestamp).toBeTruthy();
  expect(terminating.metadata.finalizers).toContain('kubernetes.io/pvc-protection');
  await new Promise((r) => setTimeout(r, 2000));
  expect(await client.kube().getOrNull(pvcPath(ns, 'data'))).not.toBeNull();
  expect(readdirSync(folder)).toContain('payload');

  // The pod goes: the claim goes, then the volume and its folder.
  expect((await client.kubectl(['-n', ns, 'delete', 'pod', 'user'])).code).toBe(0);
  await until('the claim gone', async () => (await client.kube().getOrNull(pvcPath(ns, 'data'))) === null, 60_000);
  await until('the volume gone', async () => (await client.kube().getOrNull(`/api/v1/persistentvolumes/${pv.metadata.name}`)) === null, 60_000);
  expect(existsSync(folder)).toBe(false);
});

it('a volume of the online class grows while its pod runs: the running simulator sees the new size and its disk gate reopens', async () => {
  const ns = await namespace('storage-online');
  expect((await client.applyManifest(claim('data-queen-0', '2Mi', 'queen-online'), ns)).code).toBe(0);
  await boundClaim(ns, 'data-queen-0');
  const pod = `apiVersion: v1
kind: Pod
metadata: { name: queen-0 }
spec:
  containers:
    - name: queen
      image: ghcr.io/queen-mq/queen:2.6.0
      env: [{ name: QUEEN_RAFT_DIR, value: /var/lib/queen/raft }]
      volumeMounts: [{ name: data, mountPath: /var/lib/queen/raft }]
  volumes: [{ name: data, persistentVolumeClaim: { claimName: data-queen-0 } }]
`;
  expect((await client.applyManifest(pod, ns)).code).toBe(0);
  const ip = await until('the single node serving', async () => {
    const p = await client.kube().getOrNull<any>(`/api/v1/namespaces/${ns}/pods/queen-0`);
    if (!p?.status?.podIP) return undefined;
    const h = await getJson(`http://${p.status.podIP}:6632/_sim/info`).catch(() => null);
    return h?.status === 200 ? (p.status.podIP as string) : undefined;
  }, 60_000);
  const info = (await getJson(`http://${ip}:6632/_sim/info`)).body;
  expect(info.volumeBytes).toBe(2 * 1024 * 1024);
  const fill = await sendJson('POST', `http://${ip}:6632/_sim/fill`, { bytes: Math.ceil(0.9 * 2 * 1024 * 1024) - info.usedBytes });
  expect(fill.body.gateClosed).toBe(true);

  expect((await grow(ns, 'data-queen-0', '4Mi')).code).toBe(0);
  const after = await until('the running simulator sees 4 MiB', async () => {
    const i = (await getJson(`http://${ip}:6632/_sim/info`)).body;
    return i.volumeBytes === 4 * 1024 * 1024 ? i : undefined;
  }, 30_000);
  expect(after.pid).toBe(info.pid);
  await until('the gate reopens', async () => (await getJson(`http://${ip}:6632/_sim/info`)).body.gateClosed === false, 10_000);
  const pvc = await client.kube().get<any>(pvcPath(ns, 'data-queen-0'));
  expect(pvc.status.capacity.storage).toBe('4Mi');
  expect((pvc.status.conditions ?? []).filter((c: any) => c.type === 'FileSystemResizePending')).toEqual([]);
  const events = await client.kube().get<any>(`/api/v1/namespaces/${ns}/events`, { query: { fieldSelector: 'involvedObject.name=data-queen-0' } });
  expect(events.items.map((e: any) => e.reason)).toEqual(expect.arrayContaining(['FileSystemResizeRequired', 'FileSystemResizeSuccessful']));
});

it('a growth past what the limited class provides is accepted, then refused by the resizer; a size it provides, asked instead, is granted', async () => {
  const ns = await namespace('storage-limited');
  expect((await client.applyManifest(claim('data-queen-0', '1Gi', 'queen-limited'), ns)).code).toBe(0);
  await boundClaim(ns, 'data-queen-0');
  expect((await grow(ns, 'data-queen-0', '3Gi')).code).toBe(0);
  const refused = await until('ControllerResizeInfeasible', async () => {
    const pvc = await client.kube().get<any>(pvcPath(ns, 'data-queen-0'));
    return pvc.status?.allocatedResourceStatuses?.storage === 'ControllerResizeInfeasible' ? pvc : undefined;
  }, 30_000);
  expect(refused.status.capacity.storage).toBe('1Gi');
  const cond = refused.status.conditions.find((c: any) => c.type === 'ControllerResizeError');
  expect(cond.message).toBe(
    `resize volume "${refused.spec.volumeName}" by resizer "testbed.queen.local" failed: rpc error: code = OutOfRange desc = the requested size 3Gi exceeds the largest volume of class queen-limited, 2Gi`,
  );
  // Taken back to a size the class has (a claim may ask less again after a failed growth).
  expect((await grow(ns, 'data-queen-0', '2Gi')).code).toBe(0);
  const granted = await until('2Gi granted', async () => {
    const pvc = await client.kube().get<any>(pvcPath(ns, 'data-queen-0'));
    return pvc.status?.capacity?.storage === '2Gi' ? pvc : undefined;
  }, 30_000);
  expect((granted.status.conditions ?? []).filter((c: any) => c.type === 'ControllerResizeError')).toEqual([]);
});

it('a growth the storage backend fails is retried, with the error on the claim, until the backend answers', async () => {
  const ns = await namespace('storage-failing');
  expect((await client.applyManifest(claim('data-queen-0', '1Gi'), ns)).code).toBe(0);
  await boundClaim(ns, 'data-queen-0');
  await control.setResizeFailing(ns, true);
  expect((await grow(ns, 'data-queen-0', '2Gi')).code).toBe(0);
  const failing = await until('ControllerResizeError', async () => {
    const pvc = await client.kube().get<any>(pvcPath(ns, 'data-queen-0'));
    return (pvc.status?.conditions ?? []).find((c: any) => c.type === 'ControllerResizeError');
  }, 30_000);
  expect(failing.message).toMatch(/rpc error: code = Unavailable desc = the storage backend did not answer/);
  expect((await client.kube().get<any>(pvcPath(ns, 'data-queen-0'))).status.allocatedResourceStatuses.storage).toBe('ControllerResizeInProgress');
  await control.setResizeFailing(ns, false);
  await until('2Gi once the backend answers', async () => (await client.kube().get<any>(pvcPath(ns, 'data-queen-0'))).status?.capacity?.storage === '2Gi', 30_000);
});
