// e2e `gone-while-waiting` (issue 8, item 1): a wait ends when what it waits on can no longer come.
// The upgrade restarts a pod and waits for the StatefulSet to make its successor; the pods carry a
// finalizer of the test, so the old pod stays Terminating until the test lets it go, and the
// QueenCluster (or the StatefulSet) is deleted in that window. No successor can come.
// - The QueenCluster deleted: the upgrade's run ends ("the QueenCluster is gone") instead of
//   waiting forever, and a QueenCluster created again under the same name forms (its workflow id
//   is free) on the claims it left.
// - The StatefulSet deleted by hand: the upgrade yields to forming the cluster again, which makes
//   the StatefulSet again; the pods come back on their claims.
// - The StatefulSet deleted by hand while the formation waits for its pods (held by a Secret that
//   does not exist yet): the formation stops and starts again, makes the StatefulSet again, and
//   forms once the Secret is there.
import { AppsV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { GROUP, PLURAL, VERSION } from '../../crd/schema.ts';
import { clusterEvents, createCluster, createSecret, formed, patchSpec, pods, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns, workflowRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  if (s) await holdPods(s, false).catch(() => undefined);
  await s?.close();
  s = null;
});

const HOLD = 'test.queenmq.com/hold';
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Puts (or takes off) a finalizer of the test on every pod of the cluster: a deleted pod stays Terminating while it is there. */
async function holdPods(sc: Scenario, on: boolean) {
  for (const p of await pods(sc)) {
    await sc.core
      .patchNamespacedPod({ namespace: sc.ns, name: p.metadata!.name!, body: { metadata: { finalizers: on ? [HOLD] : null } } }, merge)
      .catch(() => undefined);
  }
}

const claimUids = async (sc: Scenario) =>
  (await sc.core.listNamespacedPersistentVolumeClaim({ namespace: sc.ns })).items.map((c) => `${c.metadata?.name}=${c.metadata?.uid}`).sort();

/** Starts an upgrade and returns once it has deleted a pod (held Terminating by the finalizer). */
async function upgradeHeldInRestart(sc: Scenario) {
  await holdPods(sc, true);
  await patchSpec(sc, { version: '2.6.1' });
  await waitFor('the upgrade deleted a pod', async () => (await clusterEvents(sc)).some((e) => e.reason === 'RestartPod'), 120_000);
  const terminating = await waitFor('a pod Terminating', async () => (await pods(sc)).find((p) => p.metadata?.deletionTimestamp), 30_000);
  const runs = await workflowRuns(sc, `queencluster/${sc.ns}/queen`);
  const upgrade = runs.find((r) => r.type === 'rollingUpgrade' && r.status === 'RUNNING')!;
  expect(upgrade).toBeDefined();
  return { upgrade, pod: terminating.metadata!.name! };
}

it('gone-while-waiting: the QueenCluster deleted while a pod restarts ends the upgrade; created again, it forms on its claims', async () => {
  s = await scenario('gonecluster');
  await formed(s, seedSpec());
  const claimsBefore = await claimUids(s);
  const { upgrade } = await upgradeHeldInRestart(s);

  await s.custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: s.ns, plural: PLURAL, name: 'queen' });
  const apps = s.kc.makeApiClient(AppsV1Api);
  await waitFor('the StatefulSet gone', async () => (await apps.listNamespacedStatefulSet({ namespace: s!.ns })).items.length === 0, 60_000);
  await holdPods(s, false);
  await waitFor('the pods gone', async () => (await pods(s!)).length === 0, 60_000);

  // The upgrade's wait ended: the run is closed, and says why.
  const handle = s.temporal.workflow.getHandle(upgrade.workflowId, upgrade.runId);
  await waitFor('the upgrade run closed', async () => (await handle.describe()).status.name !== 'RUNNING', 60_000);
  expect(await handle.result()).toBe('the QueenCluster is gone');

  // The same name again: it forms (nothing holds its workflow id) on the claims the first one left.
  await createCluster(s, seedSpec({ version: '2.6.1' }));
  const back = await waitForCluster(s, 'Ready again', (q) => q.status?.phase === 'Ready' && q.status?.commits === true && JSON.stringify(q.status?.voters) === '[1,2,3]', 240_000);
  expect(back.status?.version).toBe('2.6.1');
  expect(await claimUids(s)).toEqual(claimsBefore);
});

it('gone-while-waiting: the StatefulSet deleted by hand while a pod restarts: the upgrade yields, the cluster is formed again', async () => {
  s = await scenario('gonests');
  await formed(s, seedSpec());
  const claimsBefore = await claimUids(s);
  const { upgrade } = await upgradeHeldInRestart(s);

  const apps = s.kc.makeApiClient(AppsV1Api);
  await apps.deleteNamespacedStatefulSet({ namespace: s.ns, name: 'queen' });
  await waitFor('the pods deleted with their StatefulSet', async () => (await pods(s!)).every((p) => p.metadata?.deletionTimestamp), 60_000);
  await holdPods(s, false);

  const handle = s.temporal.workflow.getHandle(upgrade.workflowId, upgrade.runId);
  await waitFor('the upgrade run closed', async () => (await handle.describe()).status.name !== 'RUNNING', 90_000);
  expect(await handle.result()).toMatch(/^the upgrade to 2\.6\.1 yielded to FormCluster after restarting pod \d/);
  const back = await waitForCluster(
    s,
    'formed again',
    (q) => q.status?.phase === 'Ready' && q.status?.commits === true && q.status?.version === '2.6.1' && JSON.stringify(q.status?.voters) === '[1,2,3]',
    240_000,
  );
  expect(back.status?.lastOperation?.result).toBe('Succeeded');
  expect(await claimUids(s)).toEqual(claimsBefore);
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.slice(0, 3).map((r) => [r.type, r.status])).toEqual([
    ['formCluster', 'COMPLETED'],
    ['rollingUpgrade', 'COMPLETED'],
    ['formCluster', 'COMPLETED'],
  ]);
  await sleep(1000);
});

it('gone-while-waiting: the StatefulSet deleted by hand while the cluster forms: the formation starts again and makes it', async () => {
  s = await scenario('goneform', { secret: false });
  await s.install();
  await createCluster(s, seedSpec());
  await waitForCluster(s, 'the formation waiting for the Secret', (q) => q.status?.phase === 'Blocked' && /^the Secret queen does not exist/.test(q.status?.message ?? ''), 120_000);
  const apps = s.kc.makeApiClient(AppsV1Api);
  const first = (await apps.readNamespacedStatefulSet({ namespace: s.ns, name: 'queen' })).metadata!.uid!;
  await apps.deleteNamespacedStatefulSet({ namespace: s.ns, name: 'queen' });
  await waitFor(
    'the StatefulSet made again',
    async () => {
      const sts = await apps.readNamespacedStatefulSet({ namespace: s!.ns, name: 'queen' }).catch(() => null);
      return !!sts && sts.metadata?.uid !== first && !sts.metadata?.deletionTimestamp;
    },
    90_000,
  );
  await createSecret(s.core, s.ns);
  await waitForCluster(s, 'Ready', (q) => q.status?.phase === 'Ready' && q.status?.commits === true && JSON.stringify(q.status?.voters) === '[1,2,3]', 240_000);
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.map((r) => [r.type, r.status])).toEqual([
    ['formCluster', 'COMPLETED'],
    ['formCluster', 'COMPLETED'],
  ]);
  expect(await s.temporal.workflow.getHandle(runs[0]!.workflowId, runs[0]!.runId).result()).toBe(
    'FormCluster stopped: the StatefulSet queen is gone; forming the cluster starts again and makes it',
  );
});
