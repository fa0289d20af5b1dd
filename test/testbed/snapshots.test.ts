// Volume snapshots: the VolumeSnapshot API from the external-snapshotter's definitions, its real
// snapshot controller, and the storage stand-in in the CSI driver's part. A snapshot is a copy of
// the volume's folder at its moment, with its size and readyToUse; a claim made from it holds that
// copy (not what was written after); a claim smaller than the snapshot is refused in the external
// provisioner's words; a class whose driver fails says so in the VolumeSnapshot's status; deleting
// the snapshot deletes its content and its copy.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { until } from './checks.ts';
import { connect } from './client.ts';

const client = connect();
const namespaces: string[] = [];
const API = '/apis/snapshot.storage.k8s.io/v1';

afterAll(async () => {
  for (const ns of namespaces) await client.deleteNamespace(ns);
});

const claim = (name: string, size: string, fromSnapshot?: string) => `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: ${name} }
spec:
  accessModes: [ReadWriteOnce]
  resources: { requests: { storage: ${size} } }
  ${fromSnapshot ? `dataSource: { apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: ${fromSnapshot} }` : ''}
`;
const snapshot = (name: string, claimName: string, cls?: string) => `
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: { name: ${name} }
spec:
  ${cls ? `volumeSnapshotClassName: ${cls}` : ''}
  source: { persistentVolumeClaimName: ${claimName} }
`;

async function folderOf(ns: string, name: string): Promise<string> {
  const pvc = await until(`claim ${ns}/${name} Bound`, async () => {
    const c = await client.kube().getOrNull<any>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/${name}`);
    return c?.status?.phase === 'Bound' ? c : undefined;
  }, 30_000);
  const pv = await client.kube().get<any>(`/api/v1/persistentvolumes/${pvc.spec.volumeName}`);
  return pv.spec.csi.volumeAttributes.path as string;
}

const volumeSnapshot = (ns: string, name: string) => client.kube().getOrNull<any>(`${API}/namespaces/${ns}/volumesnapshots/${name}`);

it('takes a snapshot of a volume, makes a claim from it, refuses a smaller claim, and deletes it', async () => {
  const ns = await client.newNamespace('snapshots');
  namespaces.push(ns);
  expect((await client.applyManifest(claim('data', '1Gi'), ns)).code).toBe(0);
  const source = await folderOf(ns, 'data');
  writeFileSync(join(source, 'log.jsonl'), 'before the snapshot\n');

  expect((await client.applyManifest(snapshot('snap-1', 'data'), ns)).code).toBe(0);
  const vs = await until('snap-1 ready', async () => {
    const s = await volumeSnapshot(ns, 'snap-1');
    return s?.status?.readyToUse === true ? s : undefined;
  }, 60_000);
  // The default class of the test bed's driver, the source volume's size, its moment.
  expect(vs.spec.volumeSnapshotClassName).toBe(client.info.snapshotClasses.default);
  expect(vs.status.restoreSize).toBe('1Gi');
  expect(Date.parse(vs.status.creationTime)).toBeGreaterThan(Date.now() - 120_000);
  const content = await client.kube().get<any>(`${API}/volumesnapshotcontents/${vs.status.boundVolumeSnapshotContentName}`);
  expect(content.spec.driver).toBe(client.info.provisioner);
  expect(content.status.snapshotHandle).toMatch(/^snap-/);
  const copy = join(client.info.dir, 'snapshots', content.status.snapshotHandle);
  expect(readFileSync(join(copy, 'log.jsonl'), 'utf8')).toBe('before the snapshot\n');

  // Written after the snapshot: a claim made from the snapshot does not hold it.
  writeFileSync(join(source, 'log.jsonl'), 'before the snapshot\nafter the snapshot\n');
  expect((await client.applyManifest(claim('restored', '2Gi', 'snap-1'), ns)).code).toBe(0);
  const restored = await folderOf(ns, 'restored');
  expect(restored).not.toBe(source);
  expect(readFileSync(join(restored, 'log.jsonl'), 'utf8')).toBe('before the snapshot\n');

  // Smaller than the snapshot: the provisioner refuses it, and says why.
  expect((await client.applyManifest(claim('too-small', '512Mi', 'snap-1'), ns)).code).toBe(0);
  const refusal = await until('ProvisioningFailed on too-small', async () => {
    const events = await client.kube().get<any>(`/api/v1/namespaces/${ns}/events`, { query: { fieldSelector: 'involvedObject.name=too-small' } });
    return events.items.find((e: any) => e.reason === 'ProvisioningFailed')?.message as string | undefined;
  }, 30_000);
  expect(refusal).toContain(`requested volume size ${512 * 2 ** 20} is less than the size ${2 ** 30} for the source snapshot snap-1`);
  expect((await client.kube().get<any>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/too-small`)).status.phase).toBe('Pending');

  // Deleted: the content goes (deletionPolicy Delete), and the copy with it. (The snapshot
  // controller holds the deletion while a claim waits to be made from it: that one goes first.)
  expect((await client.kubectl(['-n', ns, 'delete', 'pvc', 'too-small', '--wait=true', '--timeout=60s'])).code).toBe(0);
  expect((await client.kubectl(['-n', ns, 'delete', 'volumesnapshot', 'snap-1', '--wait=true', '--timeout=60s'])).code).toBe(0);
  await until('the content deleted', async () => !(await client.kube().getOrNull(`${API}/volumesnapshotcontents/${content.metadata.name}`)) || undefined, 60_000);
  expect(existsSync(copy)).toBe(false);
  // The claim made from it keeps its data.
  expect(readFileSync(join(restored, 'log.jsonl'), 'utf8')).toBe('before the snapshot\n');
});

it('a class whose driver fails says so in the VolumeSnapshot, in the driver\'s words', async () => {
  const ns = await client.newNamespace('snapshots-fail');
  namespaces.push(ns);
  expect((await client.applyManifest(claim('data', '1Gi'), ns)).code).toBe(0);
  await folderOf(ns, 'data');
  expect((await client.applyManifest(snapshot('snap-bad', 'data', client.info.snapshotClasses.failing), ns)).code).toBe(0);
  const vs = await until('snap-bad failed', async () => {
    const s = await volumeSnapshot(ns, 'snap-bad');
    return s?.status?.error?.message ? s : undefined;
  }, 60_000);
  expect(vs.status.error.message).toContain('the snapshot store is out of quota (test bed)');
  expect(vs.status.readyToUse).toBe(false);
  // A claim from it waits, and says why.
  expect((await client.applyManifest(claim('from-bad', '1Gi', 'snap-bad'), ns)).code).toBe(0);
  const why = await until('ProvisioningFailed on from-bad', async () => {
    const events = await client.kube().get<any>(`/api/v1/namespaces/${ns}/events`, { query: { fieldSelector: 'involvedObject.name=from-bad' } });
    return events.items.find((e: any) => e.reason === 'ProvisioningFailed')?.message as string | undefined;
  }, 30_000);
  expect(why).toContain('snapshot snap-bad is not Ready');
});
