// `npm run bench -- grow`: GrowVolumes of 3 voters under 200 pushes a second, three ways: a class
// that grows the volume at once (queen-expandable), the same class with every file system waiting
// for its pod to restart (the test bed's /storage/resize-pending, share 1), and a class whose node
// grows the file system while the pod runs (queen-online). The floor: the volume's growth (for
// each claim, from its request at the new size until its capacity shows it, or, when its file
// system waits for a restart, until the storage leaves it pending; the claims could grow side by
// side, so the longest counts), plus the restarts it needs (each from the old pod seen stopping
// until its successor is Ready, and minReadySeconds before each restart after the first, which the
// stop gate waits), plus the StatefulSet's re-creation around its pods (Kubernetes does not let
// its claim template change: the old one's deletion, orphaning its pods, until it is gone).
// Printed and written under .cache/, not asserted.
import { afterEach, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { startLoad } from '../testbed/load.ts';
import { formed, scenario, seedSpec, sleep, type Scenario } from '../e2e/harness.ts';
import { BENCH_RATE, change, claimGrowth, drainTime, operationRun, overheadOf, stepTimes, pushesOf, record, report, restarts, timeline, type Row } from './measure.ts';

const MIN_READY_SECONDS = 5;
let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

async function grow(sc: Scenario, operation: string, storage: { size: string; storageClassName?: string }): Promise<Row> {
  const load = startLoad({ kubeConfig: sc.kc, namespace: sc.ns, service: 'queen', rate: BENCH_RATE });
  const rec = record(sc, { volumes: true, raft: true });
  await rec.ready;
  await sleep(2000);
  const since = await change(sc, { storage });
  const run = await operationRun(sc, rec, 'GrowVolumes', since);
  await sleep(500);
  await rec.stop();
  const pushes = await pushesOf(sc, load);
  const restarted = restarts(rec, since);
  let growth = 0;
  for (const claim of rec.claims.keys()) {
    const g = claimGrowth(rec, claim, storage.size, since);
    // Until the file system waits for its pod's restart (counted apart), or, where the node grows
    // it while the pod runs (online), until the capacity shows it: the node's part.
    const waitsForRestart = restarted.some((r) => `data-${r.pod}` === claim);
    growth = Math.max(growth, g ? (waitsForRestart ? (g.pendingAt ?? g.grown) : g.grown) - g.requested : NaN);
  }
  const parts: Record<string, number> = { 'volume growth': growth };
  for (const r of restarted) parts[`${r.pod} restart`] = r.to - r.from;
  if (restarted.length > 1) parts['minReadySeconds between restarts'] = (restarted.length - 1) * MIN_READY_SECONDS * 1000;
  // A deletion the garbage collector finished within one sample shows only as gone: about 0.
  const old = rec.statefulSets.find((x) => x.goneAt !== undefined && x.goneAt >= since);
  parts['StatefulSet re-created'] = old ? old.goneAt! - (old.deletingAt ?? old.goneAt!) : NaN;
  const floorMs = Object.values(parts).reduce((a, b) => a + b, 0);
  await sleep(MIN_READY_SECONDS * 1000 + 1000);
  const drainMs = drainTime(rec, since);
  const steps = await stepTimes(sc, run, since);
  const overhead = await overheadOf(sc, rec, run, { totalMs: run.totalMs, floorMs, since, floorMinReadyMs: parts['minReadySeconds between restarts'] ?? 0 });
  return { operation, totalMs: run.totalMs, floorMs, floorParts: parts, pushes, run, drainMs, overhead, steps, timeline: timeline(rec, since) };
}

it('grow: at once, with file-system restarts, online; total time against the floor, failed pushes, history events per step, first-step latency', async () => {
  const rows: Row[] = [];
  s = await scenario('benchgrow');
  await formed(s, seedSpec({ storage: { size: '1Gi' }, minReadySeconds: MIN_READY_SECONDS }));
  await sleep(MIN_READY_SECONDS * 1000 + 1000);
  rows.push(await grow(s, 'grow, no restart (grown at once)', { size: '2Gi' }));
  await control.call('POST', '/storage/resize-pending', { share: 1, namespace: s.ns });
  rows.push(await grow(s, 'grow, file systems restart', { size: '3Gi' }));
  await s.close();
  s = null;

  s = await scenario('benchgrowon');
  await formed(s, seedSpec({ storage: { size: '1Gi', storageClassName: 'queen-online' }, minReadySeconds: MIN_READY_SECONDS }));
  await sleep(MIN_READY_SECONDS * 1000 + 1000);
  rows.push(await grow(s, 'grow, no restart (online)', { size: '2Gi', storageClassName: 'queen-online' }));
  await s.close();
  s = null;
  report('grow', rows);
});
