// e2e `backup`: spec.backup under load. A Temporal Schedule (one per cluster, visible as a Schedule
// with the overlap policy Skip) takes a backup every minute (a QueenBackup: the VolumeSnapshot of a
// caught-up follower's volume, the Raft index it holds at least, its size and time, ready) and
// keeps `keep` of them, the older ones deleted with their snapshots. A backup asked for during an
// upgrade waits for the upgrade to end before it takes anything. A snapshot class whose driver
// fails gives a failed backup with the driver's words. The pause annotation pauses the Schedule.
// Deleting the QueenCluster deletes its Schedule and keeps its backups, but those taken while
// spec.backup.deleteWithCluster was true. Nothing acknowledged by the load client is lost.
import { afterEach, expect, it } from 'vitest';
import { BACKUP_LABELS } from '../../crd/backup.ts';
import { startLoad } from '../testbed/load.ts';
import { requestedBackupWorkflowId, scheduledBackupWorkflowId } from '../../watcher/backups.ts';
import { backups, deleteScheduleAtClose, requestedBackup, schedule, volumeSnapshot } from './backups.ts';
import { recordHistory, workflowRuns } from './temporal.ts';
import { annotate, clusterEvents, expectEveryPushFirstTry, formed, getCluster, patchSpec, scenario, seedSpec, sleep, testbed, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const KEEP = 2;

it('backup: a schedule every minute under load keeps 2; a backup during an upgrade waits for it; a failing class fails; pause; delete keeps them', async () => {
  s = await scenario('backup');
  deleteScheduleAtClose(s);
  await formed(s, seedSpec({ backup: { schedule: '* * * * *', keep: KEEP } }));
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 50 });

  // The Schedule: one per cluster, every minute, Skip, not paused.
  const sched = await waitFor('the backup Schedule', () => schedule(s!).catch(() => undefined), 30_000);
  const next = sched.info.nextActionTimes.map((d) => d.getTime());
  expect(next.length).toBeGreaterThanOrEqual(2);
  expect(next[1]! - next[0]!).toBe(60_000);
  expect(sched.policies.overlap).toBe('SKIP');
  expect(sched.state.paused).toBe(false);
  expect(sched.action.workflowType).toBe('takeBackup');

  // Three backups of the schedule, then only the newest two are left.
  const readySeen = new Set<string>();
  await waitFor(
    'three scheduled backups ready, two kept',
    async () => {
      const all = (await backups(s!)).filter((b) => b.metadata.labels?.[BACKUP_LABELS.trigger] === 'schedule');
      for (const b of all) if (b.status?.phase === 'Ready') readySeen.add(b.metadata.name);
      const ready = all.filter((b) => b.status?.phase === 'Ready');
      return readySeen.size >= 3 && ready.length === KEEP && all.every((b) => b.status?.phase === 'Ready') ? ready : undefined;
    },
    300_000,
    () => [...readySeen].join(','),
  );
  const kept = (await backups(s)).filter((b) => b.metadata.labels?.[BACKUP_LABELS.trigger] === 'schedule');
  const qc = await getCluster(s);
  for (const b of kept) {
    // A caught-up follower's volume, what it holds at least, its size and moment, ready.
    expect(b.spec.cluster).toBe('queen');
    expect(b.status).toMatchObject({ phase: 'Ready', readyToUse: true, size: '1Gi', volumeSnapshot: b.metadata.name, claim: `data-queen-${b.status!.nodeId! - 1}` });
    expect(b.status!.nodeId).not.toBe(qc.status?.leader);
    expect(b.status!.raftIndex).toBeGreaterThan(0);
    expect(b.status!.raftTerm).toBeGreaterThan(0);
    expect(Date.parse(b.status!.takenAt!)).toBeGreaterThan(Date.parse(qc.metadata.creationTimestamp!));
    const vs = await volumeSnapshot(s, b.metadata.name);
    expect(vs.status.readyToUse).toBe(true);
    expect(vs.metadata.ownerReferences).toEqual([expect.objectContaining({ kind: 'QueenBackup', name: b.metadata.name, uid: b.metadata.uid })]);
  }
  // The ones past keep are gone, with their snapshots.
  const deleted = [...readySeen].filter((n) => !kept.some((b) => b.metadata.name === n));
  expect(deleted.length).toBeGreaterThanOrEqual(1);
  for (const n of deleted) await waitFor(`the snapshot of ${n} deleted with it`, async () => (await volumeSnapshot(s!, n)) === null, 60_000);
  const events = (await clusterEvents(s)).map((e) => `${e.reason}: ${e.message}`);
  expect(events.some((e) => /^BackupsDeleted: deleted the backup .*: the schedule keeps 2$/.test(e))).toBe(true);

  // A backup asked for during an upgrade waits for the upgrade to end, then is taken.
  const before = new Set((await backups(s)).map((b) => b.metadata.name));
  await patchSpec(s, { version: '2.6.1' });
  await waitForCluster(s, 'the upgrade running', (q) => q.status?.operation?.type === 'RollingUpgrade', 60_000);
  await annotate(s, { 'queenmq.com/backup': 'during-upgrade' });
  const waiting = await requestedBackup(s, before, (b) => b.status?.phase === 'Pending' && /^waiting for RollingUpgrade of the cluster to end/.test(b.status.message ?? ''), 60_000);
  expect(waiting.status?.volumeSnapshot).toBeUndefined();
  const upgraded = await waitForCluster(s, 'the upgrade done', (q) => q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded' && !q.status.operation, 300_000);
  const during = await requestedBackup(s, before, (b) => b.status?.phase === 'Ready', 120_000);
  expect(during.metadata.name).toBe(waiting.metadata.name);
  // Its snapshot was asked for once the upgrade was over; so was every scheduled one's.
  const upgradeEnd = Date.parse(upgraded.status!.lastOperation!.finishedAt!);
  const upgradeStart = Date.parse(upgraded.status!.lastOperation!.startedAt!);
  expect(Date.parse(during.status!.takenAt!)).toBeGreaterThanOrEqual(upgradeEnd - 1000);
  for (const b of await backups(s)) {
    const at = b.status?.takenAt ? Date.parse(b.status.takenAt) : null;
    if (at !== null) expect(at < upgradeStart + 1000 || at >= upgradeEnd - 1000, `${b.metadata.name} taken at ${b.status?.takenAt}, inside the upgrade`).toBe(true);
  }
  expect((await getCluster(s)).metadata.annotations?.['queenmq.com/backup']).toBeUndefined();
  const waited = (await workflowRuns(s, requestedBackupWorkflowId(s.ns, 'queen', qc.metadata.uid!, 'during-upgrade')))[0]!;
  await recordHistory(s, waited, 'takeBackup-waited');
  const scheduledRun = await waitFor('a scheduled backup run', async () => {
    for await (const w of s!.temporal.workflow.list({ query: `WorkflowType = 'takeBackup' AND ExecutionStatus = 'Completed'` })) {
      if (w.workflowId.startsWith(`${scheduledBackupWorkflowId(s!.ns, 'queen')}-`)) return { workflowId: w.workflowId, runId: w.runId };
    }
    return undefined;
  }, 30_000);
  await recordHistory(s, scheduledRun, 'takeBackup-scheduled');

  // A snapshot class whose driver fails: a failed backup, in the driver's words.
  const before2 = new Set((await backups(s)).map((b) => b.metadata.name));
  await patchSpec(s, { backup: { volumeSnapshotClassName: testbed().snapshotClasses.failing } });
  await annotate(s, { 'queenmq.com/backup': 'failing-class' });
  const failed = await requestedBackup(s, before2, (b) => b.status?.phase === 'Failed', 120_000);
  expect(failed.status?.message).toMatch(/^the snapshot failed: .*the snapshot store is out of quota \(test bed\)/);
  expect(failed.status?.readyToUse).toBe(false);
  expect((await clusterEvents(s)).some((e) => e.reason === 'BackupFailed' && e.type === 'Warning' && e.message?.includes('out of quota'))).toBe(true);
  await patchSpec(s, { backup: { volumeSnapshotClassName: null } as never });

  // Paused with the cluster: the Schedule says so and takes nothing for over a minute.
  await annotate(s, { 'queenmq.com/pause': 'true' });
  await waitFor('the Schedule paused', async () => (await schedule(s!)).state.paused === true, 30_000);
  const scheduledBefore = (await backups(s)).filter((b) => b.metadata.labels?.[BACKUP_LABELS.trigger] === 'schedule').map((b) => b.metadata.name);
  await sleep(75_000);
  const scheduledAfter = (await backups(s)).filter((b) => b.metadata.labels?.[BACKUP_LABELS.trigger] === 'schedule').map((b) => b.metadata.name);
  expect(scheduledAfter.filter((n) => !scheduledBefore.includes(n))).toEqual([]);
  await annotate(s, { 'queenmq.com/pause': null });
  await waitFor('the Schedule running again', async () => (await schedule(s!)).state.paused === false, 30_000);

  await expectEveryPushFirstTry(s, load, 'backups every minute');

  // A backup taken while deleteWithCluster is true goes with the cluster; the others stay.
  await patchSpec(s, { backup: { deleteWithCluster: true } });
  const before3 = new Set((await backups(s)).map((b) => b.metadata.name));
  await annotate(s, { 'queenmq.com/backup': 'owned' });
  const owned = await requestedBackup(s, before3, (b) => b.status?.phase === 'Ready', 120_000);
  const others = (await backups(s)).filter((b) => b.metadata.name !== owned.metadata.name && b.status?.phase === 'Ready').map((b) => b.metadata.name);
  expect(others.length).toBeGreaterThanOrEqual(KEEP);
  await s.custom.deleteNamespacedCustomObject({ group: 'queenmq.com', version: 'v1alpha1', namespace: s.ns, plural: 'queenclusters', name: 'queen' });
  await waitFor('the backup Schedule deleted with the cluster', async () => !(await schedule(s!).catch(() => null)), 60_000);
  await waitFor('the owned backup and its snapshot deleted', async () => !(await volumeSnapshot(s!, owned.metadata.name)) && !(await backups(s!)).some((b) => b.metadata.name === owned.metadata.name), 60_000);
  const left = (await backups(s)).map((b) => b.metadata.name);
  for (const n of others) {
    expect(left).toContain(n);
    expect((await volumeSnapshot(s, n))?.status?.readyToUse).toBe(true);
  }
});
