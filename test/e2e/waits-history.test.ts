// e2e `waits-history` (issue 33): what waiting costs the workflow's history, measured on one
// upgrade with a canary and a manual approval, and extrapolated. A canary's soak is one step
// whatever its length (its looks are heartbeats, which the history does not keep): the soak adds
// the same events at 10 s and at 40 s, so a one-hour soak adds them too. A wait for an approval
// adds nothing while nothing changes (no timer, no step), and a few events each time the cluster
// changes (the watcher's signal, a look, the park again): a day adds those per change.
import { afterAll, expect, it } from 'vitest';
import { annotate, formed, patchSpec, pods, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { historyEvents, pendingSteps, recordHistory, settledRuns, type Run } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

const DAY_S = 24 * 3600;

/** How many events the history of the cluster's running operation has now. */
async function historyLength(sc: Scenario): Promise<number> {
  const d = await sc.temporal.workflow.getHandle(`queencluster/${sc.ns}/queen`).describe();
  return d.historyLength;
}

/**
 * The events of a run's canary soak, from the history: from the soak's step scheduled to its end,
 * both counted (nothing else happens in the workflow meanwhile).
 */
async function soakEvents(sc: Scenario, run: Run): Promise<number> {
  const events = await historyEvents(sc, run);
  const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'awaitCanary');
  const id = Number(scheduled?.eventId);
  const completed = events.find((e) => Number(e.activityTaskCompletedEventAttributes?.scheduledEventId) === id);
  expect(completed, 'the canary step completed').toBeDefined();
  return Number(completed!.eventId) - id + 1;
}

/** Upgrades to `version` with a canary of `seconds`, approved once it waits for it; returns its run. */
async function upgrade(sc: Scenario, version: string, seconds: number, whileParked?: () => Promise<void>): Promise<Run> {
  await patchSpec(sc, { version, upgrade: { approval: 'Manual', canarySeconds: seconds } });
  await waitForCluster(sc, 'waiting for approval', (q) => q.status?.operation?.gate === 'approved' && !!q.status.operation.parked, 240_000);
  await waitFor('no step running while it waits', async () => (await pendingSteps(sc, `queencluster/${sc.ns}/queen`)).length === 0 || undefined, 10_000);
  await whileParked?.();
  await annotate(sc, { 'queenmq.com/approve': version });
  await waitForCluster(sc, `on ${version}`, (q) => q.status?.version === version && q.status?.lastOperation?.result === 'Succeeded' && q.status.phase === 'Ready', 240_000);
  const runs = (await settledRuns(sc, `queencluster/${sc.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade');
  return runs.at(-1)!;
}

it('waits-history: a canary soak adds the same events at any length; an approval adds none while nothing changes', async () => {
  s = await scenario('waitshistory');
  await formed(s, seedSpec({ minReadySeconds: 3 }));

  let quiet = 0;
  let perChange = 0;
  const quietSeconds = 60;
  const first = await upgrade(s, '2.6.1', 10, async () => {
    // Parked for the approval right after the last follower's restart: once that pod is up and
    // Ready (each a change of the cluster, and a look), nothing runs and the history stands still.
    await waitFor('every pod Ready', async () => (await pods(s)).every((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) || undefined, 120_000);
    await sleep(5000);
    const quietFrom = await historyLength(s);
    await sleep(quietSeconds * 1000);
    quiet = (await historyLength(s)) - quietFrom;
    // A change of the cluster that lifts nothing (someone else's annotation): one look, parked again.
    const changeFrom = await historyLength(s);
    await annotate(s, { 'example.com/owner': 'team-a' });
    await waitFor('the look the change asked for', async () => ((await historyLength(s)) > changeFrom ? true : undefined), 30_000);
    await sleep(5000);
    perChange = (await historyLength(s)) - changeFrom;
  });
  await recordHistory(s, first, 'rollingUpgrade-approval-canary');
  const short = await soakEvents(s, first);
  const long = await soakEvents(s, await upgrade(s, '2.6.2', 40));

  console.log(
    [
      `a canary soak: ${short} events at 10 s, ${long} at 40 s: a one-hour soak adds ${long} (goal: fewer than 500)`,
      `waiting for approval: ${quiet} events in ${quietSeconds} s with nothing changing (${Math.round((quiet * DAY_S) / quietSeconds)} a day), ${perChange} per change of the cluster` +
        ` (the signal, a look, parked again): a day adds ${Math.round((quiet * DAY_S) / quietSeconds)} and ${perChange} per change (goal: fewer than 100)`,
    ].join('\n'),
  );
  expect(long).toBe(short);
  expect(long).toBeLessThan(500);
  expect(quiet).toBe(0);
  expect(perChange).toBeGreaterThan(0);
  expect((quiet * DAY_S) / quietSeconds + perChange).toBeLessThan(100);
});
