// `npm run bench -- backup`: a backup's time and a restore's time to Ready, of a cluster of 3
// voters holding a store of about 64 MB under 200 pushes a second, against their floors. A
// backup's floor is the snapshot itself: from the VolumeSnapshot's creation until it is seen
// readyToUse (the driver's copy and the snapshot controller's binding). A restore's floor is the
// first node's boot (pod 0 seen until its container started) plus the learners' catch-up (in the
// leader's membership view, the longest of the two, from the node first shown as a learner until
// it is live within the broker's promotion limit: they catch up side by side). What is not in
// them: for a backup the choice of a voter and the operator's steps; for a restore the check of
// the backup, the claim's provisioning from the snapshot, pod 0's restart without
// QUEEN_RAFT_FORCE_RECOVER, the new pods' start and the promotion. Printed and written under
// .cache/, not asserted.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, it } from 'vitest';
import { startLoad } from '../testbed/load.ts';
import { annotate, BIG_STORE, buildStore, createCluster, formed, scenario, seedSpec, sleep, waitForCluster, type Scenario } from '../e2e/harness.ts';
import { requestedBackup, volumeSnapshot } from '../e2e/backups.ts';
import { BENCH_RATE, catchUp, pushesOf, record, timeline } from './measure.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const sec = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

it('backup: a backup and a restore to Ready against their floors', async () => {
  s = await scenario('benchbackup', { sim: BIG_STORE });
  await formed(s, seedSpec({ minReadySeconds: 5 }));
  await buildStore(s, 4000);
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: BENCH_RATE });
  await sleep(3000);

  // The backup: from the annotation to Ready; the snapshot from its creation to readyToUse.
  const asked = Date.now();
  await annotate(s, { 'queenmq.com/backup': 'bench' });
  const taken = await requestedBackup(s, new Set(), (b) => b.status?.phase === 'Ready' || b.status?.phase === 'Failed', 300_000);
  if (taken.status?.phase !== 'Ready') throw new Error(`the backup failed: ${taken.status?.message}`);
  const vs = await volumeSnapshot(s, taken.status.volumeSnapshot!);
  // The snapshot's moment (its creationTime, written once the driver's copy is made) from the VolumeSnapshot's creation.
  const vsCreated = Date.parse(vs.metadata.creationTimestamp);
  const backupMs = Date.parse(taken.status!.finishedAt!) - asked;
  const snapshotMs = Date.parse(taken.status!.takenAt!) - vsCreated;
  const pushes = await pushesOf(s, load);

  // The restore: from the new QueenCluster to Ready with three voters.
  const rec = record(s, { membership: true }, 'restored');
  await rec.ready;
  const since = Date.now();
  await createCluster(s, seedSpec({ minReadySeconds: 5, bootstrap: { fromBackup: { name: taken.metadata.name } } }), 'restored');
  const ready = await waitForCluster(s, 'the restored cluster Ready', (q) => q.status?.phase === 'Ready' && JSON.stringify(q.status.voters) === '[1,2,3]' && q.status.lastOperation?.type === 'ScaleVoters', 900_000, 'restored');
  const restoreMs = Date.parse(ready.status!.lastOperation!.finishedAt!) - since;
  await sleep(1000);
  await rec.stop();
  const first = rec.pods.get('restored-0')?.[0];
  const bootMs = first?.startedAt !== undefined ? first.startedAt - first.seenAt : NaN;
  const catchUps = [2, 3].map((id) => catchUp(rec, id, since)).map((c) => (c ? c.to - c.from : NaN));
  const catchUpMs = Math.max(...catchUps);
  const restoreFloor = bootMs + catchUpMs;

  const lines = [
    `backup benchmark at ${BENCH_RATE} pushes a second, a store of about 64 MB (messages of 16 KiB)`,
    `backup:  ${sec(backupMs)} from the annotation to Ready, floor ${sec(snapshotMs)} (the snapshot: VolumeSnapshot created until its moment of copy), ratio ${(backupMs / snapshotMs).toFixed(2)}; node ${taken.status!.nodeId}, index ${taken.status!.raftIndex}, ${taken.status!.size}`,
    `restore: ${sec(restoreMs)} from the QueenCluster to Ready with 3 voters, floor ${sec(restoreFloor)} (pod 0's boot ${sec(bootMs)} + the learners' catch-up ${sec(catchUpMs)}: ${catchUps.map(sec).join(' and ')}), ratio ${(restoreMs / restoreFloor).toFixed(2)}`,
    `pushes during the backup: ${pushes.failed} failed of ${pushes.pushes}, ${pushes.lost} lost`,
  ];
  for (const l of lines) console.log(l);
  const dir = fileURLToPath(new URL('../../.cache/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `bench-backup-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ bench: 'backup', rate: BENCH_RATE, at: new Date().toISOString(), backupMs, snapshotMs, restoreMs, bootMs, catchUps, pushes, timeline: timeline(rec, since) }, null, 1));
  console.log(`rows written to ${file}`);
});
