// e2e `restore`: a new QueenCluster (another name, the same namespace) with
// spec.bootstrap.fromBackup forms from a backup taken under load: pod 0 on a claim made from the
// snapshot, recovered alone (QUEEN_RAFT_FORCE_RECOVER), restarted without the variable, then the
// other voters added as learners and promoted by ScaleVoters. It holds every message the load
// client had acknowledged up to the backup's Raft index (the simulator's message ids carry their
// entry's index), in the source's order, and serves pushes. The source cluster is not touched: the
// same pods, the same membership and cluster id. A backup that is not ready is refused: Blocked
// with the reason, nothing created. The definition refuses a fromBackup that names two sources,
// and a change of bootstrap after creation. A backup of a cluster of one voter restored under
// another name is refused (its node would keep the source's pod addresses): Blocked, naming the
// source, no claim or pod made, the source's pods untouched.
import { AppsV1Api } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { request } from 'undici';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { backups, entryIndexOf, requestedBackup } from './backups.ts';
import { recordHistory, workflowRuns } from './temporal.ts';
import { annotate, clusterEvents, createCluster, expectEveryPushFirstTry, formed, getCluster, kubectl, patchSpec, pods, scenario, seedSpec, sleep, testbed, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

async function committed(ip: string, queue: string): Promise<string[]> {
  const res = await request(`http://${ip}:6632/_sim/committed?queue=${queue}`, { headersTimeout: 5000, bodyTimeout: 5000 });
  return ((await res.body.json()) as { transactionIds: string[] }).transactionIds;
}

async function clusterId(ip: string): Promise<string> {
  const res = await request(`http://${ip}:6632/api/v1/raft/members`, { headersTimeout: 5000, bodyTimeout: 5000 });
  return ((await res.body.json()) as { clusterId: string }).clusterId;
}

it('restore: a new cluster forms from a backup taken under load, holds every message acknowledged up to its index, serves pushes; the source is untouched; a backup not ready is refused', async () => {
  s = await scenario('restore');
  await formed(s, seedSpec());
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 100 });
  await sleep(8000);
  await annotate(s, { 'queenmq.com/backup': 'now' });
  const taken = await requestedBackup(s, new Set(), (b) => b.status?.phase === 'Ready', 120_000);
  // Messages after the backup too: the restored cluster does not need them, and may not hold them.
  await sleep(3000);
  const report = await load.stop();
  expect(report.unacknowledged).toEqual([]);
  expect(await verifyAcknowledged(report, await voterIps(s))).toEqual([]);
  const index = taken.status!.raftIndex!;
  const before = report.acknowledgedIds.filter((id) => entryIndexOf(report.messageIds[id]!) <= index);
  const after = report.acknowledgedIds.filter((id) => entryIndexOf(report.messageIds[id]!) > index);
  console.log(`backup ${taken.metadata.name}: node ${taken.status!.nodeId}, index ${index}; ${before.length} messages acknowledged up to it, ${after.length} after`);
  expect(before.length).toBeGreaterThan(200);
  expect(after.length).toBeGreaterThan(0);

  // The source as it is: its pods, its membership, its cluster id.
  const sourcePods = (await pods(s)).map((p) => `${p.metadata!.name}:${p.metadata!.uid}:${p.status!.containerStatuses![0]!.restartCount}`);
  const sourceIps = await voterIps(s);
  const sourceId = await clusterId(sourceIps[0]!);
  const sourceLog = await committed(sourceIps[0]!, report.queue);

  // The restored cluster: another name, the same namespace.
  await createCluster(s, seedSpec({ bootstrap: { fromBackup: { name: taken.metadata.name } } }), 'restored');
  const restored = await waitForCluster(
    s,
    'the restored cluster Ready with three voters',
    (q) => q.status?.phase === 'Ready' && q.status.commits === true && JSON.stringify(q.status.voters) === '[1,2,3]' && q.status.lastOperation?.type === 'ScaleVoters',
    360_000,
    'restored',
  );
  expect(restored.status?.restore).toMatchObject({ backup: taken.metadata.name, volumeSnapshot: taken.status!.volumeSnapshot, sourceCluster: 'queen', raftIndex: index });
  expect(restored.status?.restore?.recoveredAt).toBeTruthy();
  const steps = (await clusterEvents(s, 'restored')).map((e) => `${e.reason}: ${e.message}`);
  const order = ['RestoreClaim', 'LeaderElected', 'RecoveredAlone', 'VotersLive', 'WriteCommitted', 'ScalePods', 'AddLearner', 'AddLearner', 'Promote'];
  expect(steps.filter((l) => order.includes(l.split(':')[0]!)).map((l) => l.split(':')[0])).toEqual(order);
  expect(steps).toContain(`RestoreClaim: created the claim data-restored-0 of pod 0 (1Gi) from the backup ${taken.metadata.name} of queen, index ${index} at least`);
  expect(steps).toContain('Promote: promoting nodes 2 and 3 to voters');
  const restoreRun = (await workflowRuns(s, `queencluster/${s.ns}/restored`)).find((r) => r.type === 'restoreCluster')!;
  expect(restoreRun.status).toBe('COMPLETED');
  await recordHistory(s, restoreRun, 'restoreCluster');
  const claim = await s.core.readNamespacedPersistentVolumeClaim({ namespace: s.ns, name: 'data-restored-0' });
  expect(claim.spec?.dataSource).toMatchObject({ kind: 'VolumeSnapshot', name: taken.status!.volumeSnapshot });
  // Pod 0 runs without the variable.
  const pod0 = (await pods(s, 'restored')).find((p) => p.metadata!.name === 'restored-0')!;
  expect(pod0.spec!.containers[0]!.env!.some((e) => e.name === 'QUEEN_RAFT_FORCE_RECOVER')).toBe(false);

  // Every message acknowledged up to the backup's index, on every voter, in the source's order.
  const restoredIps = await voterIps(s, 'restored');
  expect(restoredIps.length).toBe(3);
  for (const ip of restoredIps) {
    const log = await waitFor(`voter ${ip} holds the backup's messages`, async () => {
      const l = await committed(ip, report.queue);
      return before.every((id) => l.includes(id)) ? l : undefined;
    }, 60_000);
    expect(log).toEqual(sourceLog.slice(0, log.length));
  }
  expect(await clusterId(restoredIps[0]!)).not.toBe(sourceId);

  // It serves pushes.
  const fresh = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'restored', rate: 50, queue: 'after-restore' });
  await sleep(5000);
  await expectEveryPushFirstTry(s, fresh, 'pushes to the restored cluster', 'restored');

  // The source is as it was.
  expect((await pods(s)).map((p) => `${p.metadata!.name}:${p.metadata!.uid}:${p.status!.containerStatuses![0]!.restartCount}`)).toEqual(sourcePods);
  const src = await getCluster(s);
  expect(src.status?.voters).toEqual([1, 2, 3]);
  expect(src.status?.phase).toBe('Ready');
  expect(await clusterId(sourceIps[0]!)).toBe(sourceId);

  // A backup that is not ready (its class fails) is refused: Blocked with the reason, nothing made.
  const known = new Set((await backups(s)).map((b) => b.metadata.name));
  await patchSpec(s, { backup: { volumeSnapshotClassName: testbed().snapshotClasses.failing } });
  await annotate(s, { 'queenmq.com/backup': 'bad' });
  const bad = await requestedBackup(s, known, (b) => b.status?.phase === 'Failed', 120_000);
  await createCluster(s, seedSpec({ bootstrap: { fromBackup: { name: bad.metadata.name } } }), 'refused');
  const refused = await waitForCluster(s, 'the restore refused', (q) => q.status?.phase === 'Blocked', 120_000, 'refused');
  expect(refused.status?.message).toMatch(new RegExp(`^the backup ${bad.metadata.name} is not ready to restore from \\(Failed: the snapshot failed: .*out of quota`));
  expect(refused.status?.operation?.gate).toBe('backup-ready');
  expect((await pods(s, 'refused')).length).toBe(0);
  expect(await s.core.readNamespacedPersistentVolumeClaim({ namespace: s.ns, name: 'data-refused-0' }).catch(() => null)).toBeNull();

  // The definition: one source, fixed at creation.
  const both = await kubectl(['-n', s.ns, 'patch', 'queencluster', 'restored', '--type', 'merge', '-p', JSON.stringify({ spec: { bootstrap: { fromBackup: { volumeSnapshot: 'x' } } } })]);
  expect(both.code).not.toBe(0);
  expect(both.stderr).toContain('fromBackup names a QueenBackup (name) or a VolumeSnapshot (volumeSnapshot): one of the two');
  const changed = await kubectl(['-n', s.ns, 'patch', 'queencluster', 'restored', '--type', 'merge', '-p', JSON.stringify({ spec: { bootstrap: null } })]);
  expect(changed.code).not.toBe(0);
  expect(changed.stderr).toContain('bootstrap is read once, when the cluster first forms: it cannot be set, changed or removed afterwards');
});

it('restore: a backup of a cluster of one voter, restored under another name, is refused before anything is made; the source is untouched', async () => {
  s = await scenario('restoreone');
  await formed(s, seedSpec({ replicas: 1 }));
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 50 });
  await sleep(3000);
  await annotate(s, { 'queenmq.com/backup': 'now' });
  const taken = await requestedBackup(s, new Set(), (b) => b.status?.phase === 'Ready', 120_000);
  expect(taken.status?.voters).toEqual([1]);
  const report = await load.stop();
  expect(report.unacknowledged).toEqual([]);
  const sourcePods = async () => (await pods(s!)).map((p) => `${p.metadata!.name}:${p.metadata!.uid}:${p.status!.containerStatuses![0]!.restartCount}`);
  const before = await sourcePods();
  expect(before).toHaveLength(1);

  await createCluster(s, seedSpec({ bootstrap: { fromBackup: { name: taken.metadata.name } } }), 'copy');
  const refused = await waitForCluster(s, 'the restore refused', (q) => q.status?.phase === 'Blocked', 120_000, 'copy');
  expect(refused.status?.message).toBe(
    `the backup ${taken.metadata.name} is of a cluster of one voter (queen): its node keeps the addresses of queen's pod 0, where the voters this cluster adds would go; ` +
      'restore it as queen (once that cluster is deleted), or delete this QueenCluster (nothing was formed yet) and create it again naming a ready backup in spec.bootstrap.fromBackup',
  );
  expect(refused.status?.operation).toMatchObject({ type: 'FormCluster', gate: 'backup-ready' });
  // It stays so: a while later still no claim, no pod, no StatefulSet of its own, no step taken.
  await sleep(10_000);
  expect((await getCluster(s, 'copy')).status?.phase).toBe('Blocked');
  expect((await pods(s, 'copy')).length).toBe(0);
  const claims = (await s.core.listNamespacedPersistentVolumeClaim({ namespace: s.ns })).items.map((c) => c.metadata!.name);
  expect(claims.filter((n) => n!.startsWith('data-copy-'))).toEqual([]);
  expect(await s.kc.makeApiClient(AppsV1Api).readNamespacedStatefulSet({ namespace: s.ns, name: 'copy' }).catch(() => null)).toBeNull();
  expect((await clusterEvents(s, 'copy')).filter((e) => e.reason === 'RestoreClaim')).toEqual([]);
  // The source: the same pod (UID, no restart), still Ready with its one voter, holding what it acknowledged.
  expect(await sourcePods()).toEqual(before);
  const src = await getCluster(s);
  expect(src.status?.phase).toBe('Ready');
  expect(src.status?.voters).toEqual([1]);
  expect(await verifyAcknowledged(report, await voterIps(s))).toEqual([]);
});
