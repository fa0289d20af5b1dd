// e2e `waits-restart` (issue 33): a wait for a person is the workflow's, so it survives the
// operator. A canary that failed under onFailure Hold stays failed when every operator pod is
// deleted by force and its cause has passed: nothing moves until a person changes onFailure. An
// approval given while no operator replica runs is honoured once one starts. A pause set and
// lifted while no replica runs leaves the upgrade as if a replica had run throughout, and one set
// while none runs holds the upgrade once one starts, until it is lifted.
import { afterEach, expect, it } from 'vitest';
import { annotate, clusterEvents, formed, getCluster, kubectl, monitor, patchSpec, pods, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { pendingSteps, settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

/** The first pod an upgrade moves: the highest ordinal that does not lead. */
const firstMoved = (leader: number) => [2, 1, 0].find((o) => o !== leader - 1)!;
const restarts = async (sc: Scenario) => (await clusterEvents(sc)).filter((e) => e.reason === 'RestartPod').map((e) => e.message);

async function isolate(sc: Scenario, pod: string, on: boolean) {
  const ip = (await pods(sc)).find((p) => p.metadata?.name === pod)?.status?.podIP;
  const r = await fetch(`http://${ip}:6632/_sim/isolate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ on }) });
  expect(((await r.json()) as { isolated: boolean }).isolated).toBe(on);
}

/** Deletes every operator pod at once, by force, as a node failure or a careless `kubectl delete` would. */
async function deleteOperatorPods(sc: Scenario): Promise<string[]> {
  const names = (await sc.installed!.pods(sc.core)).map((p) => p.metadata!.name!);
  expect((await kubectl(['-n', sc.ns, 'delete', 'pod', ...names, '--grace-period=0', '--force'])).code).toBe(0);
  return names;
}

it('waits-restart-canary: a canary failed under Hold stays failed across every operator pod deleted by force', async () => {
  s = await scenario('holdrestart');
  const sc = s;
  await sc.install({}, { replicas: 2 });
  const seconds = 30;
  const before = await formed(sc, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { canarySeconds: seconds } });
  const first = firstMoved(before.status!.leader!);
  const watch = await monitor(sc);
  await patchSpec(sc, { version: '2.6.1' });
  await waitForCluster(sc, 'the canary soaking', (q) => q.status?.operation?.gate === 'canary-soaked' && /left$/.test(q.status?.message ?? ''), 180_000);
  // Its node cut off from the others during the soak: the canary fails.
  await isolate(sc, `queen-${first}`, true);
  const held = await waitForCluster(sc, 'the upgrade held', (q) => q.status?.operation?.gate === 'new-version-healthy', 120_000);
  expect(held.status!.phase).toBe('Blocked');
  expect(held.status!.message).toMatch(/^the upgrade to 2\.6\.1 holds: the canary failed: /);
  expect(held.status!.operation?.parked).toMatchObject({ lift: 'person' });
  expect(held.status!.upgrade?.held).toMatchObject({ version: '2.6.1' });
  // The cause passes, and every operator pod goes at once.
  await isolate(sc, `queen-${first}`, false);
  const gone = await deleteOperatorPods(sc);
  const back = await sc.installed!.ready(sc.core, 2);
  expect(back.map((p) => p.metadata?.name).filter((n) => gone.includes(n!))).toEqual([]);
  // Longer than a whole soak: a canary soaked again from its beginning would have passed by now.
  await sleep((seconds + 20) * 1000);
  const still = await getCluster(sc);
  expect(still.status?.phase).toBe('Blocked');
  expect(still.status?.operation?.gate).toBe('new-version-healthy');
  expect(still.status?.message).toBe(held.status!.message);
  expect(await restarts(sc)).toEqual([`restarting pod ${first}`]);
  expect(await pendingSteps(sc, `queencluster/${sc.ns}/queen`)).toEqual([]);
  // A person decides: roll it back.
  await patchSpec(sc, { upgrade: { canarySeconds: seconds, onFailure: 'Rollback' } });
  const rolled = await waitForCluster(sc, 'rolled back', (q) => q.status?.lastOperation?.result === 'RolledBack' && q.status?.version === '2.6.0' && q.status?.phase !== 'Upgrading', 240_000);
  await watch.stop();
  console.log(`canary held across the operator:\n  ${watch.timeline.join('\n  ')}`);
  expect(rolled.status!.lastOperation!.message).toMatch(/^rolled back to 2\.6\.0: the upgrade to 2\.6\.1 failed: the canary failed: /);
  expect(await restarts(sc)).toEqual([`restarting pod ${first}`, `rolling back pod ${first} to 2.6.0`]);
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`)!.length).toBe(o === first ? 3 : 1);
  expect(rolled.status?.upgrade?.held ?? null).toBeNull();
});

it('waits-restart-approval: an approval given while no operator replica runs is honoured once one starts', async () => {
  s = await scenario('approvaldown');
  const sc = s;
  const before = await formed(sc, { ...seedSpec({ minReadySeconds: 3 }), upgrade: { approval: 'Manual' } });
  const leaderPod = before.status!.leader! - 1;
  await patchSpec(sc, { version: '2.6.1' });
  await waitForCluster(sc, 'held before the leader', (q) => q.status?.operation?.gate === 'approved' && !!q.status.operation.parked, 180_000);
  await sc.install({}, { replicas: 0 });
  await annotate(sc, { 'queenmq.com/approve': '2.6.1' });
  await sleep(10_000);
  expect(await restarts(sc)).toHaveLength(2);
  await sc.install({}, { replicas: 1 });
  const done = await waitForCluster(sc, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 240_000);
  const events = await restarts(sc);
  expect(events).toHaveLength(3);
  expect(events.at(-1)).toBe(`restarting pod ${leaderPod}`);
  expect(done.metadata.annotations?.['queenmq.com/approve']).toBeUndefined();
  expect((await settledRuns(sc, `queencluster/${sc.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade').map((r) => r.status)).toEqual(['COMPLETED']);
});

it('waits-restart-pause: a pause set and lifted while no replica runs is as if one had run throughout; one set then holds', async () => {
  s = await scenario('pausedown');
  const sc = s;
  await formed(sc, seedSpec({ minReadySeconds: 15 }));
  const watch = await monitor(sc);
  await patchSpec(sc, { version: '2.6.1' });
  await waitFor('the first restart', async () => (await restarts(sc)).length === 1 || undefined, 180_000);
  // Set and lifted while no replica runs.
  await sc.install({}, { replicas: 0 });
  await annotate(sc, { 'queenmq.com/pause': 'true' });
  await sleep(3000);
  await annotate(sc, { 'queenmq.com/pause': null });
  await sc.install({}, { replicas: 1 });
  await waitFor('the second restart', async () => (await restarts(sc)).length === 2 || undefined, 180_000);
  // Set while none runs: the upgrade holds at its gate once one runs, parked, until it is lifted.
  await sc.install({}, { replicas: 0 });
  await annotate(sc, { 'queenmq.com/pause': 'true' });
  await sc.install({}, { replicas: 1 });
  const held = await waitForCluster(sc, 'held by the pause', (q) => q.status?.operation?.gate === 'not-paused' && !!q.status.operation.parked, 180_000);
  expect(held.status?.message).toMatch(/^pod \d is next: paused by the queenmq\.com\/pause annotation$/);
  await sleep(5000);
  expect(await restarts(sc)).toHaveLength(2);
  expect(await pendingSteps(sc, `queencluster/${sc.ns}/queen`)).toEqual([]);
  await annotate(sc, { 'queenmq.com/pause': null });
  await waitForCluster(sc, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 240_000);
  await watch.stop();
  expect(await restarts(sc)).toHaveLength(3);
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`)).toHaveLength(2);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  expect((await settledRuns(sc, `queencluster/${sc.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade').map((r) => r.status)).toEqual(['COMPLETED']);
});
