// e2e `promote`: seed-000-style disaster recovery. A source takes 200 pushes a second through its
// client Service while its standby follows; every pod of the source is killed and kept down. The
// standby turns Degraded with the source's address and the cause; promote=true is then let
// through (the source no longer answers), the Event says where the standby stood and what it had
// not read, and the promoted cluster takes writes. Every message the load client saw acknowledged
// is counted against what the promoted cluster holds: the ones missing were all acknowledged after
// the time of the standby's position (the loss bound the Event gives, and keeps).
import { afterEach, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { startLoad, verifyAcknowledgedDetail } from '../testbed/load.ts';
import { annotate, clusterEvents, createCluster, LOAD_RATE, scenario, sleep, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { formSource, standbyFollowing, standbySpec } from './link-scenario.ts';
import { recordHistory, settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('promote: the source lost under load, the standby promoted; what it lost is within the bound its Event gives', async () => {
  s = await scenario('promote');
  await s.install({ probeInterval: '5s' });
  await formSource(s);
  await createCluster(s, standbySpec(), 'dr');
  await standbyFollowing(s);
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: LOAD_RATE, queue: 'orders', attemptTimeoutMs: 2000, giveUpAfterMs: 5000 });
  await waitFor('the load under way', async () => load.progress().acknowledged > 2000, 60_000);

  // A promotion while the source answers is refused: two clusters would take writes.
  await annotate(s, { 'queenmq.com/promote': 'true' }, 'dr');
  const held = await waitForCluster(s, 'the promotion held', (q) => q.status?.operation?.gate === 'source-stopped', 60_000, 'dr');
  expect(held.status?.phase).toBe('Blocked');
  expect(held.status?.message).toMatch(new RegExp(`^the source ${s.ns}/queen still answers the standby \\(\\S+ ago\\): a promotion now would make two clusters that take writes; stop the source, ask for a switchover \\(queenmq.com/switchover=true\\), or annotate queenmq.com/promote=force$`));

  // The disaster: every pod of the source killed, and kept down.
  const killedAt = Date.now();
  await Promise.all([0, 1, 2].map((i) => control.kill(s!.ns, `queen-${i}`, { hold: true })));
  const report = await load.stop();
  // The held promotion goes on once the source has been silent for a while.
  const done = await waitForCluster(
    s,
    'the standby promoted',
    (q) => q.status?.lastOperation?.type === 'PromoteStandby' && q.status.lastOperation.result === 'Succeeded' && q.status?.phase === 'Ready',
    180_000,
    'dr',
  );
  expect(done.status?.role).toBe('promoted');
  expect(done.metadata.annotations?.['queenmq.com/promote']).toBeUndefined();
  const promoted = done.status!.standby!.promoted!;
  expect(promoted.planned).toBe(false);
  const events = (await clusterEvents(s, 'dr')).map((e) => `${e.reason}: ${e.message}`);
  const position = events.find((e) => e.startsWith('PromotePosition: '))!;
  expect(position).toMatch(
    /^PromotePosition: the standby stands at entry \d+ of its source, written at \d\d:\d\d:\d\d\.\d{3}: what the source committed up to then is here, what it committed after is lost \(when the source last answered, \S+ ago, the node it read had \d+ (entry|entries) more\)$/,
  );
  expect(events).toEqual(expect.arrayContaining([expect.stringMatching(/^Promoted: promoted through pod \d: the cluster takes writes; it holds its source's log up to entry \d+$/)]));

  // What the load client saw acknowledged, against what the promoted cluster holds.
  const check = await verifyAcknowledgedDetail(report, await voterIps(s, 'dr'), { timeoutMs: 10_000 });
  const lost = check.missing;
  const positionTime = Date.parse(promoted.positionTime!);
  const lostEarly = lost.filter((id) => report.acknowledgedAt[id]! <= positionTime);
  const ackedAfter = report.acknowledgedIds.filter((id) => report.acknowledgedAt[id]! > positionTime).length;
  console.log(
    `promote: ${report.acknowledged} acknowledged by the source, ${lost.length} not in the promoted cluster; the standby stood at entry ${promoted.position} ` +
      `(written ${promoted.positionTime}), ${promoted.unreadEntries} entries unread at the source's last answer (${promoted.lastAnswerAt}); ` +
      `${ackedAfter} acknowledged after the position's time; source killed at ${new Date(killedAt).toISOString()}`,
  );
  expect(report.acknowledged).toBeGreaterThan(2000);
  // The bound kept: nothing acknowledged before the position's time is missing.
  expect(lostEarly).toEqual([]);
  expect(lost.length).toBeLessThanOrEqual(ackedAfter);

  // The promoted cluster takes writes through its client Service.
  const after = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'dr', rate: 50, queue: 'after' });
  await sleep(3000);
  const afterReport = await after.stop();
  expect(afterReport.acknowledged).toBeGreaterThan(50);
  expect(afterReport.unacknowledged).toEqual([]);

  const runs = (await settledRuns(s, `queencluster/${s.ns}/dr`)).filter((r) => r.type === 'promoteStandby');
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  await recordHistory(s, runs[0]!, 'promoteStandby');
});
