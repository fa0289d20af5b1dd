// e2e `no-worker` (issue 8, item 9): an operation that no worker takes up says so. Only the
// watcher runs (workers down, or listening on another task queue): the QueenCluster's formation
// is started and nobody takes it up. After a short while status says it waits for a worker on the
// task queue it was started on, with a Warning Event; once a worker runs, the cluster forms. The
// worker then goes away in the middle of an upgrade: status says the upgrade waits for a worker,
// and once one runs again the upgrade goes on and finishes in the same run.
import { afterEach, expect, it } from 'vitest';
import { clusterEvents, createCluster, patchSpec, scenario, seedSpec, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('no-worker: a started operation no worker takes up names the task queue it waits on', async () => {
  s = await scenario('noworker');
  s.startOperator('watcher', { extra: ['--run=watcher'] });
  await createCluster(s, seedSpec());
  const waiting = await waitForCluster(s, 'waiting for a worker', (q) => (q.status?.message ?? '').startsWith('waiting for a worker'), 90_000);
  expect(waiting.status?.phase).toBe('Forming');
  expect(waiting.status?.message).toMatch(
    new RegExp(`^waiting for a worker on task queue ${s.taskQueue}: FormCluster was started \\d+s ago and no worker has taken it up \\(are the operator's workers running, on that task queue\\?\\)$`),
  );
  expect(waiting.status?.operation).toMatchObject({ type: 'FormCluster', workflowId: `queencluster/${s.ns}/queen`, gate: 'worker-polling', target: '3 voters on 2.6.0' });
  // The Event follows the status write: waited for, not read once (CI saw it read a moment early).
  const told = await waitFor('the NoWorker Event', async () => {
    const events = (await clusterEvents(s!)).filter((e) => e.reason === 'NoWorker');
    return events.length > 0 ? events : undefined;
  }, 30_000);
  expect(told.map((e) => e.type)).toEqual(['Warning']);

  const worker = s.startOperator('worker', { extra: ['--run=worker'] });
  const ready = await waitForCluster(s, 'Ready', (q) => q.status?.phase === 'Ready' && q.status?.commits === true && JSON.stringify(q.status?.voters) === '[1,2,3]', 240_000);
  expect(ready.status?.lastOperation).toMatchObject({ type: 'FormCluster', result: 'Succeeded', runId: waiting.status?.operation?.runId });

  // The workers go away in the middle of an upgrade, while it waits at a gate: once its wait's
  // attempt has timed out and the next one waits for a worker, status says so (no step can), and
  // the operation goes on once a worker runs again.
  await patchSpec(s, { version: '2.6.1', minReadySeconds: 30 });
  const waitingAtGate = await waitForCluster(s, 'the upgrade waiting at a gate', (q) => / has been Ready for less than 30s/.test(q.status?.message ?? ''), 180_000);
  await worker.kill('SIGKILL');
  const stuck = await waitForCluster(s, 'the upgrade waiting for a worker', (q) => (q.status?.message ?? '').startsWith('waiting for a worker'), 180_000);
  expect(stuck.status?.phase).toBe('Upgrading');
  expect(stuck.status?.message).toMatch(
    new RegExp(`^waiting for a worker on task queue ${s.taskQueue}: RollingUpgrade has waited \\d+s for a worker to take up its next step \\(.+\\) \\(are the operator's workers running, on that task queue\\?\\)$`),
  );
  expect(stuck.status?.operation).toMatchObject({ type: 'RollingUpgrade', runId: waitingAtGate.status?.operation?.runId, gate: 'worker-polling' });
  await waitFor('a second NoWorker Event', async () => ((await clusterEvents(s!)).filter((e) => e.reason === 'NoWorker').length >= 2 ? true : undefined), 30_000);

  s.startOperator('worker-again', { extra: ['--run=worker'] });
  const moving = await waitForCluster(s, 'the upgrade saying its step again', (q) => q.status?.phase === 'Upgrading' && !(q.status?.message ?? '').startsWith('waiting for a worker'), 120_000);
  expect(moving.status?.operation?.gate).not.toBe('worker-polling');
  const upgraded = await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 300_000);
  expect(upgraded.status?.lastOperation?.runId).toBe(waitingAtGate.status?.operation?.runId);
});
