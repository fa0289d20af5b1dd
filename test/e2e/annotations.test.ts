// e2e `annotations`: what a person types with `kubectl annotate` does what it says, or is said to
// be refused, on a formed cluster of three voters, as `kubectl describe` and `kubectl get` show it:
// a value an annotation does not take is a Warning Event naming it and the values it takes, and
// acts as unset; pause=false does not pause; a cancel with nothing to cancel is removed with an
// Event, and cancels nothing later; a cancel value it does not take cancels nothing; a replacement
// of a pod that is no voter's is refused (Blocked once nothing runs) without interrupting the
// upgrade that runs.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { annotate, clusterEvents, formed, getCluster, kubectl, patchSpec, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns, workflowRuns } from './temporal.ts';

let s: Scenario;
beforeAll(async () => {
  s = await scenario('annotations');
  await formed(s, seedSpec());
});
afterAll(() => s?.close());

const operationId = () => `queencluster/${s.ns}/queen`;

/** Waits for an Event of this reason; returns the messages of all of them. */
async function eventsOf(reason: string, count = 1): Promise<{ type: string; message: string }[]> {
  return waitFor(
    `${count} Event(s) ${reason}`,
    async () => {
      const found = (await clusterEvents(s)).filter((e) => e.reason === reason).map((e) => ({ type: e.type!, message: e.message! }));
      return found.length >= count ? found : undefined;
    },
    60_000,
  );
}

it('a value pause does not take is a Warning that names it, and pauses nothing', async () => {
  const r = await kubectl(['-n', s.ns, 'annotate', 'queencluster', 'queen', 'queenmq.com/pause=yes']);
  expect(r.code).toBe(0);
  expect(await eventsOf('InvalidAnnotation')).toEqual([
    { type: 'Warning', message: 'queenmq.com/pause="yes" is not a value it takes (true or false): it is read as unset, nothing is paused' },
  ]);
  // Said once, not at every look.
  await sleep(5000);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'InvalidAnnotation')).toHaveLength(1);
  const describe = await kubectl(['-n', s.ns, 'describe', 'queencluster', 'queen']);
  expect(describe.stdout).toMatch(/Warning\s+InvalidAnnotation\s+.*queenmq\.com\/pause="yes" is not a value it takes \(true or false\)/);
  // Unset: a spec change starts its operation.
  await patchSpec(s, { version: '2.6.1' });
  await waitForCluster(s, 'the upgrade to 2.6.1 done', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 300_000);
});

it('a cancel with nothing to cancel is removed, with an Event, and cancels nothing that starts later', async () => {
  await settledRuns(s, operationId());
  await annotate(s, { 'queenmq.com/pause': null, 'queenmq.com/cancel': 'true' });
  await waitFor('the cancel annotation removed', async () => !(await getCluster(s)).metadata.annotations?.['queenmq.com/cancel'], 60_000);
  expect(await eventsOf('NothingToCancel')).toEqual([
    {
      type: 'Normal',
      message: 'no operation runs, so there is nothing to cancel: the queenmq.com/cancel annotation was removed, and cancels nothing that starts later',
    },
  ]);
});

it('pause=true holds a new operation; pause=false lets it go', async () => {
  await annotate(s, { 'queenmq.com/pause': 'true' });
  await patchSpec(s, { version: '2.6.2' });
  const paused = await waitForCluster(s, 'paused said in status', (q) => /^paused by the queenmq\.com\/pause annotation/.test(q.status?.message ?? ''), 60_000);
  expect(paused.status?.message).toBe('paused by the queenmq.com/pause annotation: RollingUpgrade (2.6.2) waits');
  await sleep(3000);
  expect((await workflowRuns(s, operationId())).filter((r) => r.type === 'rollingUpgrade')).toHaveLength(1);

  await kubectl(['-n', s.ns, 'annotate', 'queencluster', 'queen', 'queenmq.com/pause=false', '--overwrite']);
  await waitForCluster(s, 'the upgrade to 2.6.2 running', (q) => q.status?.phase === 'Upgrading', 60_000);
});

it('a replacement of a pod that is no voter, and a cancel value it does not take, interrupt nothing of the upgrade that runs', async () => {
  // The upgrade to 2.6.2 of the test before runs now.
  const running = (await workflowRuns(s, operationId())).filter((r) => r.status === 'RUNNING');
  expect(running.map((r) => r.type)).toEqual(['rollingUpgrade']);
  await annotate(s, { 'queenmq.com/cancel': 'now' });
  expect(await eventsOf('InvalidAnnotation', 2)).toContainEqual({
    type: 'Warning',
    message: 'queenmq.com/cancel="now" is not a value it takes (true or false): it is read as unset, nothing is cancelled',
  });
  await annotate(s, { 'queenmq.com/replace-pod': 'queen-7' });
  expect(await eventsOf('ReplaceRefused')).toEqual([
    {
      type: 'Warning',
      message: 'the pod asked to be replaced, "queen-7", is not a voter of this cluster: name a pod from queen-0 to queen-2 in queenmq.com/replace-pod, or remove it',
    },
  ]);
  // The upgrade goes on to its end: it is not asked to yield.
  const done = await waitForCluster(s, 'the upgrade to 2.6.2 ended', (q) => q.status?.lastOperation?.target === '2.6.2', 300_000);
  expect(done.status?.lastOperation?.result).toBe('Succeeded');
  const runs = await settledRuns(s, operationId());
  expect(runs.map((r) => r.type)).toEqual(['formCluster', 'rollingUpgrade', 'rollingUpgrade']);
  expect(runs.at(-1)!.runId).toBe(running[0]!.runId);
  // With nothing running, the refusal shows as Blocked, and nothing starts for it.
  const blocked = await waitForCluster(s, 'Blocked by the refused replacement', (q) => q.status?.phase === 'Blocked', 60_000);
  expect(blocked.status?.message).toMatch(/^the pod asked to be replaced, "queen-7", is not a voter of this cluster/);
  expect((await kubectl(['-n', s.ns, 'get', 'queencluster', 'queen', '-o', 'wide'])).stdout).toMatch(/Blocked\s+the pod asked to be replaced, "queen-7"/);
  await annotate(s, { 'queenmq.com/replace-pod': null, 'queenmq.com/cancel': null });
  await waitForCluster(s, 'Ready once the annotation is gone', (q) => q.status?.phase === 'Ready', 60_000);
  expect((await workflowRuns(s, operationId())).map((r) => r.type)).toEqual(['formCluster', 'rollingUpgrade', 'rollingUpgrade']);
});

it('an annotation of ours that does not exist is said once', async () => {
  await annotate(s, { 'queenmq.com/pasue': 'true' });
  expect(await eventsOf('InvalidAnnotation', 3)).toContainEqual({
    type: 'Warning',
    message: 'queenmq.com/pasue is not an annotation of this operator, which reads queenmq.com/replace-pod, queenmq.com/cancel, queenmq.com/retry, queenmq.com/approve, queenmq.com/finalize, queenmq.com/plan, queenmq.com/plan-only, queenmq.com/backup, queenmq.com/promote, queenmq.com/switchover, queenmq.com/pause: it is ignored',
  });
});
