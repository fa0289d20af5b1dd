// e2e `upgrade-cancel`: cancelling the upgrade's workflow from the Temporal CLI stops it between
// pods with the cluster whole. The status says it was cancelled, which pods run which version and
// how to resume; the operator does not start it again until a retry is asked for.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { annotate, clusterEvents, formed, getCluster, patchSpec, pods, scenario, seedSpec, sleep, testbed, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { recordHistory, settledRuns, workflowRuns } from './temporal.ts';

let s: Scenario;
afterEach(() => s?.close());

it('upgrade-cancel: stops between pods, says how to resume, resumes on retry', async () => {
  s = await scenario('cancel');
  await formed(s, seedSpec({ minReadySeconds: 10 }));
  await patchSpec(s, { version: '2.6.1' });
  await waitFor('the first restart', async () => (await clusterEvents(s)).some((e) => e.reason === 'RestartPod'), 120_000);
  const tb = testbed();
  const cancel = spawnSync(join(tb.tools.temporalBin, 'temporal'), ['workflow', 'cancel', '--address', tb.temporal.address, '--namespace', 'default', '--workflow-id', `queencluster/${s.ns}/queen`], { encoding: 'utf8' });
  expect(cancel.status, cancel.stderr).toBe(0);

  const stopped = await waitForCluster(s, 'the upgrade cancelled', (q) => q.status?.lastOperation?.result === 'Cancelled', 120_000);
  const message = stopped.status!.lastOperation!.message!;
  expect(message).toMatch(/^the upgrade to 2\.6\.1 was cancelled after restarting pod \d: /);
  expect(message).toMatch(/pod \d runs 2\.6\.1/);
  expect(message).toMatch(/pods \d and \d run 2\.6\.0/);
  expect(message).toContain('queenmq.com/retry=');
  // It ended once the pod it restarted was back: every pod was Ready before it finished.
  const finishedAt = Date.parse(stopped.status!.lastOperation!.finishedAt!);
  for (const p of await pods(s)) {
    const ready = p.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.status, p.metadata?.name).toBe('True');
    expect(new Date(ready!.lastTransitionTime as unknown as string).getTime(), p.metadata?.name).toBeLessThanOrEqual(finishedAt);
  }
  // The cluster says it is not where its spec wants it, and why.
  await waitForCluster(s, 'Blocked with the cancel message', (q) => q.status?.phase === 'Blocked' && q.status?.message === message && !!q.status?.members?.every((m) => m.ready && m.live), 60_000);
  const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
  expect(runs.filter((r) => r.type === 'rollingUpgrade').map((r) => r.status)).toEqual(['CANCELLED']);
  await recordHistory(s, runs.find((r) => r.type === 'rollingUpgrade')!, 'rollingUpgrade-cancelled');

  // No hot loop: nothing starts again for the same spec.
  await sleep(15_000);
  expect((await workflowRuns(s, `queencluster/${s.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade')).toHaveLength(1);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toHaveLength(1);

  // A retry resumes it, and only the pods still on 2.6.0 restart.
  await annotate(s, { 'queenmq.com/retry': '1' });
  const done = await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 300_000);
  expect(done.status?.lastOperation).toMatchObject({ type: 'RollingUpgrade', result: 'Succeeded', retryToken: '1' });
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toHaveLength(3);
  expect((await getCluster(s)).status?.operation ?? null).toBeNull();
});

it('upgrade-cancel by annotation: queenmq.com/cancel stops it the same way and is consumed', async () => {
  s = await scenario('cancelann');
  await formed(s, seedSpec({ minReadySeconds: 10 })); // time for the annotation to land before the next pod
  await patchSpec(s, { version: '2.6.1' });
  await waitFor('the first restart', async () => (await clusterEvents(s)).some((e) => e.reason === 'RestartPod'), 120_000);
  await annotate(s, { 'queenmq.com/cancel': 'true' });
  const stopped = await waitForCluster(s, 'the upgrade cancelled', (q) => q.status?.lastOperation?.result === 'Cancelled', 120_000);
  expect(stopped.status?.lastOperation?.message).toMatch(/^the upgrade to 2\.6\.1 was cancelled after restarting pod \d/);
  await waitFor('the cancel annotation removed', async () => !(await getCluster(s)).metadata.annotations?.['queenmq.com/cancel'], 30_000);
  await sleep(5000);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toHaveLength(1);
  // The cancel it consumed is not taken for a cancel with nothing to cancel.
  expect((await clusterEvents(s)).filter((e) => e.reason === 'NothingToCancel')).toEqual([]);
});
