// e2e `upgrade-pause`: queenmq.com/pause holds the next disruptive step of a running upgrade (its
// gate `not-paused`) and starts nothing new; removing it lets the upgrade go on.
import { afterAll, expect, it } from 'vitest';
import { annotate, clusterEvents, formed, patchSpec, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { workflowRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('upgrade-pause: nothing starts while paused; a running upgrade holds at its gate', async () => {
  s = await scenario('pause');
  await formed(s, seedSpec({ minReadySeconds: 10 })); // time for the second pause to land before the next pod
  await annotate(s, { 'queenmq.com/pause': 'true' });
  await patchSpec(s, { version: '2.6.1' });
  const paused = await waitForCluster(s, 'paused said in status', (q) => /^paused by the queenmq\.com\/pause annotation/.test(q.status?.message ?? ''), 60_000);
  // The Paused condition says so too, for tools that read conditions (kstatus).
  expect(paused.status?.conditions?.find((c) => c.type === 'Paused')).toMatchObject({ status: 'True', reason: 'PauseAnnotation' });
  await sleep(5000);
  expect((await workflowRuns(s, `queencluster/${s.ns}/queen`)).map((r) => r.type)).toEqual(['formCluster']);

  await annotate(s, { 'queenmq.com/pause': null });
  await waitFor('the first restart', async () => (await clusterEvents(s)).some((e) => e.reason === 'RestartPod'), 120_000);
  await annotate(s, { 'queenmq.com/pause': 'true' });
  const held = await waitForCluster(s, 'the upgrade held by the pause', (q) => q.status?.operation?.gate === 'not-paused', 120_000);
  expect(held.status?.message).toMatch(/^pod \d is next: paused by the queenmq\.com\/pause annotation$/);
  expect(held.status?.conditions?.find((c) => c.type === 'Paused')?.status).toBe('True');
  await sleep(5000);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toHaveLength(1);
  await annotate(s, { 'queenmq.com/pause': null });
  const done = await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 300_000);
  expect(done.status?.conditions?.find((c) => c.type === 'Paused')?.status).toBe('False');
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toHaveLength(3);
});
