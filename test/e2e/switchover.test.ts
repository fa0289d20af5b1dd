// e2e `switchover`: a planned switch within one Kubernetes cluster, under 200 pushes a second from
// a client that keeps retrying and reaches both clusters' client Services (a standby answers 503
// `standby` until it is promoted). The source is taken out of its clients' reach, the standby
// reads its last entry and is promoted, the old source becomes a standby of the new primary from
// a seed of it. Every push is acknowledged in the end and every acknowledged message is in the new
// primary: nothing is lost; the clients' write downtime is printed.
import { afterEach, expect, it } from 'vitest';
import { longestWriteGap, startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { annotate, clusterEvents, createCluster, LOAD_RATE, scenario, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { formSource, standbyFollowing, standbySpec } from './link-scenario.ts';
import { recordHistory, settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('switchover: the standby becomes the primary and the source its standby, with nothing acknowledged lost', async () => {
  s = await scenario('switchover');
  await s.install({ probeInterval: '5s' });
  await formSource(s);
  await createCluster(s, standbySpec(), 'dr');
  await standbyFollowing(s);
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: ['queen', 'dr'], rate: LOAD_RATE, queue: 'orders', attemptTimeoutMs: 2000, giveUpAfterMs: 120_000 });
  await waitFor('the load under way', async () => load.progress().acknowledged > 1000, 60_000);

  await annotate(s, { 'queenmq.com/switchover': 'true' }, 'dr');
  const done = await waitForCluster(
    s,
    'the switchover done',
    (q) => q.status?.lastOperation?.type === 'Switchover' && q.status.lastOperation.result === 'Succeeded',
    300_000,
    'dr',
  );
  expect(done.status?.role).toBe('promoted');
  expect(done.status?.standby?.promoted?.planned).toBe(true);
  // Its spec says it is a source now; spec.standby stays, ignored, and nothing it renders changed.
  expect(done.spec.link).toEqual({ tokenSecret: { name: 'link', key: 'token' } });
  expect(done.spec.standby?.source).toEqual({ cluster: { name: 'queen' } });
  expect(done.metadata.annotations?.['queenmq.com/switchover']).toBeUndefined();
  // The old source follows the new primary.
  const old = await waitForCluster(
    s,
    'the old source a standby of the new primary',
    (q) => q.status?.phase === 'Standby' && q.status?.standby?.source === `${s!.ns}/dr` && JSON.stringify(q.status?.voters) === '[1,2,3]',
    300_000,
    'queen',
  );
  expect(old.spec.standby?.source).toEqual({ cluster: { name: 'dr' } });
  await waitFor('a few more acknowledgements after the switch', async () => load.progress().failedAttempts >= 0 && load.progress().acknowledged > 0, 1000);
  const report = await load.stop();

  const gap = longestWriteGap(report);
  console.log(
    `switchover: ${report.acknowledged} of ${report.sent} pushes acknowledged (${report.retried} after a retry); ` +
      `the clients' write downtime: ${(gap.ms / 1000).toFixed(2)} s from ${gap.from ? new Date(gap.from).toISOString() : '-'}; ` +
      `the operator says: ${done.status?.lastOperation?.message}`,
  );
  expect(report.unacknowledged).toEqual([]);
  // Nothing acknowledged is lost: every acknowledged message is on every voter of the new primary.
  expect(await verifyAcknowledged(report, await voterIps(s, 'dr'), { timeoutMs: 60_000 })).toEqual([]);

  const reasons = (await clusterEvents(s, 'dr')).map((e) => e.reason);
  const steps = ['SwitchoverStarted', 'SwitchoverChecked', 'FenceSource', 'StandbyCaughtUp', 'StopSource', 'PromotePosition', 'Promoted', 'WriteCommitted', 'DemoteSource', 'SwitchoverSucceeded'];
  expect(reasons.filter((r) => steps.includes(r!))).toEqual(steps);
  expect((await clusterEvents(s, 'queen')).map((e) => e.reason)).toContain('DemotedBySwitchover');
  const runs = (await settledRuns(s, `queencluster/${s.ns}/dr`)).filter((r) => r.type === 'switchover');
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  await recordHistory(s, runs[0]!, 'switchover');
});
