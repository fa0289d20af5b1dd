// `npm run bench -- standby`: a standby beside its source under 200 pushes a second. First the
// standby's lag while it follows (its leader's link status, sampled every 200 ms for 20 s: entries
// not read yet, and the age of its last entry while the source holds more); then a switchover, with
// the clients' write downtime (the longest time no push was acknowledged, for a client that keeps
// retrying and reaches both clusters' client Services) and the switchover's steps as Temporal
// timed them. The floor of the downtime: the drain wait the source's clients are given to see it
// leave its Service (--drain-wait) plus the stop grace of its pods (1 s). Printed, not asserted.
import { afterEach, it } from 'vitest';
import { request } from 'undici';
import { longestWriteGap, startLoad } from '../testbed/load.ts';
import { annotate, createCluster, pods, scenario, sleep, waitForCluster, type Scenario } from '../e2e/harness.ts';
import { formSource, standbyFollowing, standbySpec } from '../e2e/link-scenario.ts';
import { historyEvents, settledRuns } from '../e2e/temporal.ts';
import { BENCH_RATE } from './measure.ts';

const DRAIN_WAIT_MS = 2000;
const STOP_GRACE_MS = 1000;
let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const quantile = (xs: number[], q: number) => {
  const a = [...xs].sort((x, y) => x - y);
  return a.length ? a[Math.min(a.length - 1, Math.floor(q * a.length))]! : NaN;
};

it('standby: its lag while it follows, and the write downtime of a switchover, at 200 pushes a second', async () => {
  s = await scenario('benchsb');
  await s.install({ probeInterval: '5s', extra: [`--drain-wait=${DRAIN_WAIT_MS / 1000}s`] });
  await formSource(s);
  await createCluster(s, standbySpec(), 'dr');
  await standbyFollowing(s);
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: ['queen', 'dr'], rate: BENCH_RATE, queue: 'bench', attemptTimeoutMs: 2000, giveUpAfterMs: 120_000 });
  await sleep(5000);

  // The lag, from the standby's leader.
  const lagEntries: number[] = [];
  const lagMs: number[] = [];
  const until = Date.now() + 20_000;
  while (Date.now() < until) {
    const qc = await waitForCluster(s, 'a leader', (q) => q.status?.leader != null, 30_000, 'dr');
    const leaderPod = (await pods(s, 'dr')).find((p) => p.metadata?.name === `dr-${qc.status!.leader! - 1}`);
    try {
      const r = await request(`http://${leaderPod!.status!.podIP}:6632/api/v1/system/link`, { headersTimeout: 2000, bodyTimeout: 2000 });
      const f = ((await r.body.json()) as { follower?: { lagEntries: number; lagMs: number } }).follower;
      if (f) {
        lagEntries.push(f.lagEntries);
        lagMs.push(f.lagMs);
      }
    } catch {
      // a look lost: the next one
    }
    await sleep(200);
  }

  // The switchover.
  const since = Date.now();
  await annotate(s, { 'queenmq.com/switchover': 'true' }, 'dr');
  const done = await waitForCluster(s, 'the switchover done', (q) => q.status?.lastOperation?.type === 'Switchover' && Date.parse(q.status.lastOperation.startedAt ?? '') >= since - 2000, 600_000, 'dr');
  await sleep(3000);
  const report = await load.stop();
  const gap = longestWriteGap(report);
  const run = (await settledRuns(s, `queencluster/${s.ns}/dr`)).find((r) => r.type === 'switchover');
  const steps: string[] = [];
  if (run) {
    const events = await historyEvents(s, run);
    const scheduled = new Map<string, { type: string; at: number }>();
    for (const e of events) {
      const at = Number(e.eventTime?.seconds ?? 0) * 1000 + Math.round((e.eventTime?.nanos ?? 0) / 1e6);
      const a = e.activityTaskScheduledEventAttributes;
      if (a) scheduled.set(String(e.eventId), { type: a.activityType?.name ?? '', at });
      const c = e.activityTaskCompletedEventAttributes;
      if (c) {
        const from = scheduled.get(String(c.scheduledEventId));
        if (from) steps.push(`${from.type} ${((at - from.at) / 1000).toFixed(2)}s`);
      }
    }
  }
  const floor = DRAIN_WAIT_MS + STOP_GRACE_MS;
  const ms = (x: number) => `${(x / 1000).toFixed(2)}s`;
  console.log(
    [
      `standby lag at ${BENCH_RATE} pushes a second (${lagEntries.length} looks over 20 s): entries median ${quantile(lagEntries, 0.5)}, p95 ${quantile(lagEntries, 0.95)}, ` +
        `max ${Math.max(...lagEntries)}; age of its last entry median ${ms(quantile(lagMs, 0.5))}, p95 ${ms(quantile(lagMs, 0.95))}, max ${ms(Math.max(...lagMs))}`,
      `switchover: ${done.status?.lastOperation?.result} in ${ms(Date.parse(done.status!.lastOperation!.finishedAt!) - Date.parse(done.status!.lastOperation!.startedAt!))}; ` +
        `the clients' write downtime ${ms(gap.ms)} (floor ${ms(floor)}: the drain wait and the stop grace; ratio ${(gap.ms / floor).toFixed(2)}); ` +
        `${report.acknowledged} of ${report.sent} pushes acknowledged, ${report.unacknowledged.length} not`,
      `switchover steps (activity, scheduled to completed): ${steps.join(', ')}`,
    ].join('\n'),
  );
});
