// e2e `downgrade`: the one-way door of an upgrade. 2.6.0's build reads catalogue version 6 and
// 2.7.0's reads 7; once every pod runs 2.7.0 the leader raises the cluster to 7, and 2.6.0 can no
// longer start on its data. A revert of spec.version after that is refused before any pod stops
// (Blocked, both numbers, the command that puts the running version back, the same words in the
// plan); with spec.upgrade.finalize Manual the way back stays open and the revert goes through; a
// rollback in the middle of an upgrade, before the raise, goes as before; a rollback that the
// raise has made impossible holds, and no pod goes back; a fixed build named then goes forward on
// its own although no pod is Ready (a fix-forward), one pod at a time. Under load, nothing
// acknowledged is lost and, where no pod crashes, every push is acknowledged on its first try.
import { AppsV1Api } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { request } from 'undici';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import {
  annotate,
  clusterEvents,
  expectEveryPushFirstTry,
  formed,
  getCluster,
  monitor,
  patchSpec,
  pods,
  scenario,
  seedSpec,
  sleep,
  voterIps,
  waitFor,
  waitForCluster,
  type Scenario,
} from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

/** The pods' UIDs by name. */
const uids = async (sc: Scenario) => Object.fromEntries((await pods(sc)).map((p) => [p.metadata!.name!, p.metadata!.uid!]));
const restarts = async (sc: Scenario) => (await clusterEvents(sc)).filter((e) => e.reason === 'RestartPod').flatMap((e) => Array.from({ length: e.count ?? 1 }, () => e.message!));

/** Formed on 2.6.0, raised to what its build reads (6), every version recorded as the brokers said. */
async function formedAt6(sc: Scenario, spec = seedSpec()) {
  await formed(sc, spec);
  return waitForCluster(sc, 'catalogue version 6 recorded', (q) => q.status?.clusterVersion === 6 && !!q.status?.versions?.some((v) => v.version === '2.6.0' && v.kinds === 6), 60_000);
}

it('downgrade: a revert after a complete upgrade whose version was raised is Blocked before any pod stops; the plan says so first', async () => {
  s = await scenario('downgrade');
  const sc = s;
  await formedAt6(sc);
  const load = startLoad({ kubeConfig: sc.kc, namespace: sc.ns, service: 'queen', rate: 50 });
  await patchSpec(sc, { version: '2.7.0' });
  const upgraded = await waitForCluster(
    sc,
    'every pod on 2.7.0, the cluster raised to 7',
    (q) => q.status?.version === '2.7.0' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded' && q.status?.clusterVersion === 7,
    300_000,
  );
  // What status says of the door: each member's build, what each version reads, finalized.
  expect(upgraded.status!.members!.map((m) => m.kinds)).toEqual([7, 7, 7]);
  expect(upgraded.status!.versions).toEqual([expect.objectContaining({ version: '2.6.0', kinds: 6 }), expect.objectContaining({ version: '2.7.0', kinds: 7 })]);
  await waitForCluster(sc, 'finalized', (q) => q.status?.finalization === '2.7.0, finalized at catalogue version 7: 2.6.0 (reads 6) can no longer start on it', 30_000);
  const before = await uids(sc);
  const restartedBefore = (await restarts(sc)).length;
  const watch = await monitor(sc);

  // The plan, before anything runs: refused, with the gate that holds it.
  await annotate(sc, { 'queenmq.com/plan-only': 'true' });
  await patchSpec(sc, { version: '2.6.0' });
  const refused =
    `2.6.0 cannot start on this cluster: its build reads catalogue version 6 and the cluster is at 7: no pod is stopped; set spec.version back to 2.7.0 ` +
    `(or to a version whose build reads 7 or more): kubectl -n ${sc.ns} patch queencluster queen --type merge -p '{"spec":{"version":"2.7.0"}}'`;
  const planned = await waitForCluster(sc, 'the plan of the revert', (q) => q.status?.plan?.operation === 'RollingUpgrade' && q.status.plan.target === '2.6.0', 60_000);
  expect(planned.status!.plan!.steps).toEqual([{ step: refused, gates: ['version-can-boot'], note: 'Blocked: it waits for a person' }]);

  // Let it run: Blocked, the same words, no pod stopped, the StatefulSet's template untouched.
  await annotate(sc, { 'queenmq.com/plan-only': null });
  const blocked = await waitForCluster(sc, 'the revert Blocked', (q) => q.status?.phase === 'Blocked' && q.status?.message === refused, 120_000);
  expect(blocked.status!.operation).toMatchObject({ type: 'RollingUpgrade', gate: 'version-can-boot' });
  expect(blocked.status!.conditions?.find((c) => c.type === 'Stalled')).toMatchObject({ status: 'True' });
  await sleep(10_000);
  expect(await uids(sc)).toEqual(before);
  expect(await restarts(sc)).toHaveLength(restartedBefore);
  const sts = await sc.kc.makeApiClient(AppsV1Api).readNamespacedStatefulSet({ name: 'queen', namespace: sc.ns });
  expect(sts.spec!.template.spec!.containers[0]!.image).toBe('ghcr.io/queen-mq/queen:2.7.0');
  expect((await getCluster(sc)).status!.clusterVersion).toBe(7);

  // What the person is told to do: the running version back. Nothing restarts for it.
  await patchSpec(sc, { version: '2.7.0' });
  // The upgrade that held goes to the version named now: nothing restarts for it.
  const back = await waitForCluster(
    sc,
    'back on 2.7.0',
    (q) => q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded' && q.status?.lastOperation?.message === 'every pod runs 2.7.0: no pod needed a restart',
    120_000,
  );
  expect(back.status!.version).toBe('2.7.0');
  await watch.stop();
  console.log(`downgrade:\n  ${watch.timeline.join('\n  ')}`);
  expect(await uids(sc)).toEqual(before);
  for (const [name, seen] of watch.uids) expect(seen, name).toHaveLength(1);
  await expectEveryPushFirstTry(sc, load, 'downgrade');
});

it('downgrade-manual: with finalize Manual the cluster stays at 6 on 2.7.0, says the way back is open, and the revert goes through', async () => {
  s = await scenario('downmanual');
  const sc = s;
  await formedAt6(sc);
  const load = startLoad({ kubeConfig: sc.kc, namespace: sc.ns, service: 'queen', rate: 50 });
  await patchSpec(sc, { version: '2.7.0', upgrade: { finalize: 'Manual' } });
  const open = '2.7.0, not finalized: the way back to 2.6.0 is open';
  const upgraded = await waitForCluster(
    sc,
    'every pod on 2.7.0, not finalized',
    (q) => q.status?.version === '2.7.0' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded' && q.status?.finalization === open,
    300_000,
  );
  expect(upgraded.status!.clusterVersion).toBe(6);
  expect(upgraded.status!.members!.map((m) => m.kinds)).toEqual([7, 7, 7]);
  await waitForCluster(sc, 'the Ready line says it', (q) => q.status?.phase === 'Ready' && q.status?.message === open, 30_000);
  await sleep(3000);
  expect((await getCluster(sc)).status!.clusterVersion).toBe(6);

  // The revert goes as any upgrade: every pod back on 2.6.0, one at a time.
  const watch = await monitor(sc);
  await patchSpec(sc, { version: '2.6.0' });
  const reverted = await waitForCluster(
    sc,
    'every pod back on 2.6.0',
    (q) => q.status?.version === '2.6.0' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded' && q.status.lastOperation.target === '2.6.0',
    300_000,
  );
  await watch.stop();
  expect(reverted.status!.clusterVersion).toBe(6);
  expect(reverted.status!.members!.map((m) => m.kinds)).toEqual([6, 6, 6]);
  for (const [name, seen] of watch.uids) expect(seen, name).toHaveLength(2);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  expect(watch.phases.filter((p) => p !== 'Upgrading' && p !== 'Ready')).toEqual([]);
  await expectEveryPushFirstTry(sc, load, 'downgrade-manual');
});

it('downgrade-midway: a rollback in the middle of an upgrade to 2.7.0, before the raise, goes back as before', async () => {
  s = await scenario('downmid');
  const sc = s;
  await formedAt6(sc, { ...seedSpec(), upgrade: { onFailure: 'Rollback' } });
  const load = startLoad({ kubeConfig: sc.kc, namespace: sc.ns, service: 'queen', rate: 50 });
  await patchSpec(sc, { version: '2.7.0-bootfail' });
  const rolled = await waitForCluster(sc, 'rolled back', (q) => q.status?.lastOperation?.result === 'RolledBack', 300_000);
  expect(rolled.status!.lastOperation!.message).toMatch(/^rolled back to 2\.6\.0: the upgrade to 2\.7\.0-bootfail failed: pod \d crash-loops on 2\.7\.0-bootfail/);
  const settled = await waitForCluster(sc, 'every pod on 2.6.0 again', (q) => q.status?.version === '2.6.0', 120_000);
  expect(settled.status!.clusterVersion).toBe(6);
  const report = await load.stop();
  const missing = await verifyAcknowledged(report, await voterIps(sc));
  console.log(`downgrade-midway: ${report.acknowledged} acknowledged, ${report.failedAttempts.length} failed attempts, ${missing.length} lost`);
  expect(report.acknowledged).toBeGreaterThan(100);
  expect(missing).toEqual([]);
});

it('downgrade-rollback-raised: a rollback that the raise made impossible holds Blocked and no pod goes back; a fixed build then goes forward on its own, though no pod is Ready', async () => {
  s = await scenario('downraised');
  const sc = s;
  const before = await formedAt6(sc, { ...seedSpec(), upgrade: { onFailure: 'Rollback', progressDeadlineSeconds: 10 } });
  const last = before.status!.leader! - 1;
  const watch = await monitor(sc);
  // A 2.7.0 whose new format does not work: ready while the cluster is at 6, 503 for good once the
  // leader raised it to 7, which it does as soon as the last pod (the leader) runs it.
  const broken = '2.7.0-breaksonraise';
  await patchSpec(sc, { version: broken });
  const held = await waitForCluster(sc, 'the rollback held', (q) => q.status?.phase === 'Blocked' && /it cannot roll back/.test(q.status?.message ?? ''), 240_000).catch(async (err: unknown) => {
    await watch.stop();
    console.log(`downgrade-rollback-raised:\n  ${watch.timeline.join('\n  ')}`);
    throw err;
  });
  expect(held.status!.message).toBe(
    `the upgrade to ${broken} failed: pod ${last} did not become Ready and live on ${broken} within 10s: pod ${last} is not Ready; it cannot roll back: ` +
      '2.6.0 cannot start on this cluster: its build reads catalogue version 6 and the cluster is at 7, and no pod goes back to it; ' +
      `set spec.version to a version whose build reads 7 or more (a fixed ${broken})`,
  );
  expect(held.status!.operation).toMatchObject({ gate: 'version-can-boot' });
  expect(held.status!.upgrade!.rollback).toMatchObject({ version: '2.6.0', failedVersion: broken });
  await waitForCluster(sc, 'the raise recorded', (q) => q.status?.clusterVersion === 7, 30_000);
  const events = await clusterEvents(sc);
  expect(events.find((e) => e.reason === 'RollBackRefused')).toMatchObject({ type: 'Warning', message: held.status!.message });
  expect(events.find((e) => e.reason === 'RollBack')).toBeUndefined();
  // No pod goes back, and the StatefulSet's template stays on what the pods run.
  const frozen = await uids(sc);
  await sleep(10_000);
  expect(await uids(sc)).toEqual(frozen);
  expect((await restarts(sc)).filter((m) => m.startsWith('rolling back'))).toEqual([]);
  const sts = await sc.kc.makeApiClient(AppsV1Api).readNamespacedStatefulSet({ name: 'queen', namespace: sc.ns });
  expect(sts.spec!.template.spec!.containers[0]!.image).toBe(`ghcr.io/queen-mq/queen:${broken}`);

  await watch.stop();
  console.log(`downgrade-rollback-raised:\n  ${watch.timeline.join('\n  ')}`);
  expect(watch.maxNotReady).toBe(3); // the broken build: every pod 503 once the cluster is at 7

  // A person names a fixed build: the rollback ends (Failed, saying why), and the new spec goes on.
  // No pod is Ready, every broker live, caught up and committing: the upgrade restarts them all the
  // same (a fix-forward), one at a time, the leader last, and says why. Nobody deletes a pod.
  const leader = (await getCluster(sc)).status!.leader! - 1;
  const fix = await monitor(sc);
  const fixLoad = startLoad({ kubeConfig: sc.kc, namespace: sc.ns, service: 'queen', rate: 50 });
  const fixedAt = Math.floor(Date.now() / 1000) * 1000;
  await patchSpec(sc, { version: '2.7.1' });
  const next = await waitForCluster(sc, 'the new spec under way', (q) => q.status?.operation?.target === '2.7.1', 120_000);
  expect(next.status!.upgrade?.rollback ?? null).toBeNull();
  expect(next.status!.lastOperation).toMatchObject({ type: 'RollingUpgrade', result: 'Failed', message: `${held.status!.message}; the spec changed since: it goes on` });
  const done = await waitForCluster(
    sc,
    'every pod on 2.7.1, the cluster Ready and committing',
    (q) => q.status?.version === '2.7.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded' && q.status.lastOperation.target === '2.7.1' && q.status?.commits === true,
    300_000,
  ).finally(async () => {
    await fix.stop();
    console.log(`downgrade-rollback-raised, the fix-forward:\n  ${fix.timeline.join('\n  ')}`);
  });
  const report = await fixLoad.stop();
  expect(done.status!.clusterVersion).toBe(7);
  expect(done.status!.members!.map((m) => m.kinds)).toEqual([7, 7, 7]);
  // Every pod restarted once, onto 2.7.1; never two voters down at once.
  expect([...fix.uids.keys()].sort()).toEqual(Object.keys(frozen).sort());
  for (const [name, seen] of fix.uids) expect(seen, name).toEqual([frozen[name], expect.not.stringMatching(`^${frozen[name]}$`)]);
  for (const p of await pods(sc)) expect(p.spec!.containers[0]!.image, p.metadata!.name).toBe('ghcr.io/queen-mq/queen:2.7.1');
  expect(fix.maxDown).toBe(1);
  // Each restart said why it went although pods were not Ready, the leader last needing no such words.
  const stamp = (e: { lastTimestamp?: unknown; eventTime?: unknown; firstTimestamp?: unknown }) => new Date((e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp) as string).getTime();
  const steps = (await clusterEvents(sc)).filter((e) => e.reason === 'RestartPod' && stamp(e) >= fixedAt).map((e) => e.message!);
  const order = steps.map((m) => Number(/^restarting pod (\d)/.exec(m)?.[1]));
  expect([...order].sort()).toEqual([0, 1, 2]);
  expect(order[2]).toBe(leader);
  const why = 'the version it leaves is Ready on none of its pods, while the voters that stay are live, caught up and commit writes';
  expect(steps).toEqual([
    `restarting pod ${order[0]} although no pod is Ready: ${why}; pod ${order[0]} serves no client, so stopping it cuts none off`,
    `restarting pod ${order[1]} although pod ${leader} is not Ready: ${why}; pod ${order[1]} serves no client, so stopping it cuts none off`,
    `restarting pod ${leader}`,
  ]);
  // Clients are served again from the first pod on 2.7.1: what they were told is stored is there.
  const missing = await verifyAcknowledged(report, await voterIps(sc));
  console.log(`downgrade-rollback-raised: ${report.acknowledged} acknowledged, ${report.failedAttempts.length} failed attempts, ${report.unacknowledged.length} unanswered, ${missing.length} lost`);
  expect(report.acknowledged).toBeGreaterThan(100);
  expect(missing).toEqual([]);
}, 900_000);
