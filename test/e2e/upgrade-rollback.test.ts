// e2e `upgrade-rollback`: spec.upgrade.onFailure Rollback. A version that crash-loops, under load:
// the first pod that moved goes back to the previous template through the stop gate, the status
// says RolledBack with the reason and the version that failed, nothing acknowledged is lost and
// no pod restarts more than twice; the version is not tried again until a retry asks (it fails
// and rolls back again) or the spec changes (a good version then goes through). A version that
// never becomes Ready fails at the progress deadline, and an operator replica deleted by force in
// the middle of the rollback leaves the other one to finish it.
import { afterEach, expect, it } from 'vitest';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { annotate, clusterEvents, formed, getCluster, kubectl, monitor, patchSpec, scenario, seedSpec, sleep, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { currentStep, recordHistory, settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

/** The first pod an upgrade moves: the highest ordinal that does not lead. */
const firstMoved = (leader: number) => [2, 1, 0].find((o) => o !== leader - 1)!;
/** The restarts as Events, in order; a repeat within ten minutes folds into its Event's count. */
const restartEvents = async (sc: Scenario) =>
  (await clusterEvents(sc)).filter((e) => e.reason === 'RestartPod').flatMap((e) => Array.from({ length: e.count ?? 1 }, () => e.message!));

it('upgrade-rollback: a version that crash-loops is rolled back under load, nothing lost, each pod restarted at most twice', async () => {
  s = await scenario('rollback');
  const sc = s;
  const before = await formed(sc, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { onFailure: 'Rollback' } });
  const first = firstMoved(before.status!.leader!);
  const load = startLoad({ kubeConfig: sc.kc, namespace: sc.ns, service: 'queen', rate: 50 });
  await sleep(3000);
  const watch = await monitor(sc);
  await patchSpec(sc, { version: '2.6.1-bootfail' });
  const rolled = await waitForCluster(sc, 'the upgrade rolled back', (q) => q.status?.lastOperation?.result === 'RolledBack' && q.status?.phase === 'Blocked', 300_000);
  await sleep(2000);
  await watch.stop();
  const report = await load.stop();
  const missing = await verifyAcknowledged(report, await voterIps(sc));
  console.log(`rollback: ${report.acknowledged} acknowledged (${report.acknowledgedFirstTry} on the first try), ${report.failedAttempts.length} failed attempts, ${missing.length} lost`);
  console.log(`rollback:\n  ${watch.timeline.join('\n  ')}`);
  expect(report.acknowledged).toBeGreaterThan(100);
  expect(missing).toEqual([]);

  // The first pod moved, crash-looped, and went back; no other pod moved; never two voters down.
  expect(await restartEvents(sc)).toEqual([`restarting pod ${first}`, `rolling back pod ${first} to 2.6.0`]);
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`)!.length).toBeLessThanOrEqual(o === first ? 3 : 1);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  const reason = `pod ${first} crash-loops on 2.6.1-bootfail: its container exited with code 1`;
  const message = rolled.status!.lastOperation!.message!;
  expect(message).toMatch(new RegExp(`^rolled back to 2\\.6\\.0: the upgrade to 2\\.6\\.1-bootfail failed: ${reason} \\(\\d+ restarts?\\); pod ${first} went back to 2\\.6\\.0; 2\\.6\\.1-bootfail is not tried again until the spec changes, or: kubectl -n ${sc.ns} annotate queencluster queen queenmq\\.com/retry=`));
  expect(rolled.status!.message).toBe(message);
  expect(rolled.status!.conditions?.find((c) => c.type === 'Stalled')).toMatchObject({ status: 'True' });
  expect(watch.messages.some((m) => m.startsWith(`rolling back pod ${first} to 2.6.0`))).toBe(true);
  const events = await clusterEvents(sc);
  expect(events.find((e) => e.reason === 'RollBack')).toMatchObject({ type: 'Warning', message: expect.stringContaining(`rolling back to 2.6.0: ${reason}`) });
  expect(events.find((e) => e.reason === 'RollingUpgradeRolledBack')).toMatchObject({ type: 'Warning', message });
  // Every pod runs the previous version again, the record of the rollback is gone, the one of the template stays.
  const settled = await waitForCluster(sc, 'every pod on 2.6.0', (q) => q.status?.version === '2.6.0', 60_000);
  expect(settled.status?.upgrade?.rollback ?? null).toBeNull();
  expect(settled.status?.upgrade?.previous).toMatchObject({ version: '2.6.0', image: 'ghcr.io/queen-mq/queen:2.6.0' });
  const runs = (await settledRuns(sc, `queencluster/${sc.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade');
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  await recordHistory(sc, runs[0]!, 'rollingUpgrade-rolled-back');

  // Not tried again by itself.
  await sleep(8000);
  expect(await restartEvents(sc)).toHaveLength(2);
  expect((await getCluster(sc)).status?.lastOperation?.result).toBe('RolledBack');

  // A retry tries it again (and it rolls back again); a new spec goes through.
  await annotate(sc, { 'queenmq.com/retry': 'once-more' });
  await waitForCluster(sc, 'the retry rolled back', (q) => q.status?.lastOperation?.result === 'RolledBack' && q.status?.lastOperation?.retryToken === 'once-more', 300_000);
  expect(await restartEvents(sc)).toHaveLength(4);
  // The spec put back as it was: applied again (the Services and the budget too), no pod restarts.
  await patchSpec(sc, { version: '2.6.0' });
  const back = await waitForCluster(sc, 'the spec put back', (q) => q.status?.lastOperation?.result === 'Succeeded' && q.status?.phase === 'Ready', 120_000);
  expect(back.status!.lastOperation!.message).toBe('every pod runs 2.6.0: no pod needed a restart');
  expect(await restartEvents(sc)).toHaveLength(4);
  await patchSpec(sc, { version: '2.6.1' });
  const fixed = await waitForCluster(sc, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 300_000);
  expect(fixed.status?.upgrade?.previous).toMatchObject({ version: '2.6.0' });
});

it('upgrade-rollback-deadline: a version that never becomes Ready is rolled back at the deadline; a replica deleted by force mid-rollback is taken over', async () => {
  s = await scenario('rbdeadline');
  const sc = s;
  await sc.install({}, { replicas: 2 });
  const before = await formed(sc, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { onFailure: 'Rollback', progressDeadlineSeconds: 20 } });
  const first = firstMoved(before.status!.leader!);
  const watch = await monitor(sc);
  await patchSpec(sc, { version: '2.6.1-unready' });
  // Until the deadline the upgrade waits for the pod, as for any pod that comes back.
  await waitForCluster(sc, 'the moved pod awaited', (q) => new RegExp(`is next: pod ${first} is not Ready$`).test(q.status?.message ?? ''), 120_000);
  await waitForCluster(sc, 'the rollback under way', (q) => !!q.status?.upgrade?.rollback, 120_000);
  const step = await waitFor('the replica running a step', () => currentStep(sc, `queencluster/${sc.ns}/queen`).then((x) => x ?? undefined), 60_000);
  console.log(`deleting ${step.pod} by force while it runs ${step.activity}`);
  expect((await kubectl(['-n', sc.ns, 'delete', 'pod', step.pod, '--grace-period=0', '--force'])).code).toBe(0);
  const rolled = await waitForCluster(sc, 'the upgrade rolled back', (q) => q.status?.lastOperation?.result === 'RolledBack' && q.status?.version === '2.6.0', 300_000);
  await watch.stop();
  console.log(`deadline:\n  ${watch.timeline.join('\n  ')}`);
  expect(rolled.status!.lastOperation!.message).toContain(`the upgrade to 2.6.1-unready failed: pod ${first} did not become Ready and live on 2.6.1-unready within 20s: pod ${first} is not Ready`);
  expect(await restartEvents(sc)).toEqual([`restarting pod ${first}`, `rolling back pod ${first} to 2.6.0`]);
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`)!.length).toBeLessThanOrEqual(o === first ? 3 : 1);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
});

it('upgrade-rollback-resumed: a rollback cancelled half-way is finished by the next run (status.upgrade.rollback), on a retry', async () => {
  s = await scenario('rbresume');
  const sc = s;
  const before = await formed(sc, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { onFailure: 'Rollback', progressDeadlineSeconds: 15 } });
  const first = firstMoved(before.status!.leader!);
  await patchSpec(sc, { version: '2.6.1-unready' });
  await waitForCluster(sc, 'the moved pod awaited', (q) => new RegExp(`is next: pod ${first} is not Ready$`).test(q.status?.message ?? ''), 120_000);
  // Paused, the rollback begins (the template goes back, the record is written) and holds before its restart.
  await annotate(sc, { 'queenmq.com/pause': 'true' });
  const held = `rolling back to 2.6.0: pod ${first} is next: paused by the queenmq.com/pause annotation`;
  const holding = await waitForCluster(sc, 'the rollback held by the pause', (q) => q.status?.message === held, 120_000);
  expect(holding.status!.operation?.gate).toBe('not-paused');
  expect(holding.status!.upgrade!.rollback).toMatchObject({ version: '2.6.0', failedVersion: '2.6.1-unready' });
  await annotate(sc, { 'queenmq.com/cancel': 'true' });
  const cancelled = await waitForCluster(sc, 'the rollback cancelled', (q) => q.status?.lastOperation?.result === 'Cancelled', 120_000);
  expect(cancelled.status!.lastOperation!.message).toMatch(/^the rollback from 2\.6\.1-unready to 2\.6\.0 was cancelled after no restart: .*; to resume: kubectl /);
  expect(cancelled.status!.upgrade?.rollback).toMatchObject({ failedVersion: '2.6.1-unready' });
  expect(await restartEvents(sc)).toEqual([`restarting pod ${first}`]);

  // A retry starts a new run, which finds the rollback under way and finishes it: the upgrade is not tried again.
  await annotate(sc, { 'queenmq.com/pause': null, 'queenmq.com/retry': 'go-on' });
  const rolled = await waitForCluster(sc, 'the upgrade rolled back', (q) => q.status?.lastOperation?.result === 'RolledBack' && q.status?.version === '2.6.0', 180_000);
  expect(rolled.status!.lastOperation!.message).toContain(`the upgrade to 2.6.1-unready failed: pod ${first} did not become Ready and live on 2.6.1-unready within 15s`);
  expect(await restartEvents(sc)).toEqual([`restarting pod ${first}`, `rolling back pod ${first} to 2.6.0`]);
  expect(rolled.status!.upgrade?.rollback ?? null).toBeNull();
  const runs = (await settledRuns(sc, `queencluster/${sc.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade');
  expect(runs.map((r) => r.status)).toEqual(['CANCELLED', 'COMPLETED']);
  await recordHistory(sc, runs[1]!, 'rollingUpgrade-rollback-resumed');
});
