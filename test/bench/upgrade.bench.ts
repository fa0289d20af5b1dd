// `npm run bench -- upgrade`: a 3-voter and a 5-voter upgrade in the test bed under 200 pushes a
// second. For each: the total time (from the spec change to the end of the operation), the floor
// (for each pod, its restart until it is Ready again, plus minReadySeconds; the tight floor, in
// a note, leaves out the last pod's, which nothing waits for), their ratio, the failed pushes,
// the Temporal history events per step, and the first step's latency. Printed (and written under
// .cache/), not asserted: timing depends on the machine.
import { afterEach, it } from 'vitest';
import { startLoad } from '../testbed/load.ts';
import { formed, scenario, seedSpec, sleep, type Scenario } from '../e2e/harness.ts';
import { BENCH_RATE, change, drainTime, operationRun, pushesOf, record, report, restarts, timeline, type Row } from './measure.ts';

const MIN_READY_SECONDS = 5;
let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

async function measure(replicas: 3 | 5): Promise<Row> {
  s = await scenario(`bench${replicas}`);
  await formed(s, seedSpec({ replicas, minReadySeconds: MIN_READY_SECONDS }));
  // Every pod Ready for minReadySeconds before the change, so the first stop is not held back by the formation.
  await sleep(MIN_READY_SECONDS * 1000 + 1000);
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: BENCH_RATE });
  const rec = record(s);
  await rec.ready;
  await sleep(2000);
  const since = await change(s, { version: '2.6.1' });
  const run = await operationRun(s, rec, 'RollingUpgrade', since);
  await rec.stop();
  const pushes = await pushesOf(s, load);
  const parts: Record<string, number> = {};
  for (const r of restarts(rec, since)) parts[`${r.pod} restart`] = r.to - r.from;
  if (Object.keys(parts).length !== replicas) console.log(`  ${replicas} voters: ${Object.keys(parts).length} restarts seen, not ${replicas}`);
  parts['minReadySeconds × pods'] = MIN_READY_SECONDS * 1000 * replicas;
  const floorMs = Object.values(parts).reduce((a, b) => a + b, 0);
  const drainMs = drainTime(rec, since);
  // No wait follows the last pod's restart (the operation ends once it is Ready and a write
  // commits): the tight floor leaves its minReadySeconds out.
  const tight = floorMs - MIN_READY_SECONDS * 1000;
  const notes = `without the last pod's minReadySeconds, which nothing waits for, the floor is ${(tight / 1000).toFixed(1)}s and the ratio ${(run.totalMs / tight).toFixed(2)}`;
  const row: Row = { operation: `upgrade ${replicas} voters`, totalMs: run.totalMs, floorMs, floorParts: parts, pushes, run, drainMs, notes, timeline: timeline(rec, since) };
  await s.close();
  s = null;
  return row;
}

it('upgrade: total time against the floor, failed pushes, history events per step, first-step latency', async () => {
  const rows: Row[] = [];
  for (const replicas of [3, 5] as const) rows.push(await measure(replicas));
  report('upgrade', rows);
});
