// e2e `no-worker` (issue 8, item 9): an operation that no worker takes up says so. Only the
// watcher runs (workers down, or listening on another task queue): the QueenCluster's formation
// is started and nobody takes it up. After a short while status says it waits for a worker on the
// task queue it was started on, with a Warning Event; once a worker runs, the cluster forms.
import { afterEach, expect, it } from 'vitest';
import { clusterEvents, createCluster, scenario, seedSpec, waitFor, waitForCluster, type Scenario } from './harness.ts';

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

  s.startOperator('worker', { extra: ['--run=worker'] });
  const ready = await waitForCluster(s, 'Ready', (q) => q.status?.phase === 'Ready' && q.status?.commits === true && JSON.stringify(q.status?.voters) === '[1,2,3]', 240_000);
  expect(ready.status?.lastOperation).toMatchObject({ type: 'FormCluster', result: 'Succeeded', runId: waiting.status?.operation?.runId });
});
