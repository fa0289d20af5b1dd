// `npm run bench -- scale-voters`: ScaleVoters under 200 pushes a second. 3→5 and 5→3 on a cluster
// holding a store of about 200 MB (the e2e `scale` scenario's), then 3→1 and 1→3 on a cluster
// without one. The floors: going up, the new pods' start (first seen until their container
// started; they start side by side) plus the learners' catch-up (in the leader's membership view,
// from a node first shown as a learner until it is live within the broker's promotion limit; the
// learners have a link each, so the longest counts); going down, the removed pods' stop (their
// deletion until they are gone; they stop side by side, the longest counts), plus, when a removed
// node leads, its hand-off (its pod's deletion until another node leads, in the leader's view). The drain before a node leaves and the membership changes are not in
// the floor. Printed and written under .cache/, not asserted. QUEEN_BENCH_SCALE_TO=1 runs 3→1→3 alone,
// QUEEN_BENCH_SCALE_TO=5 3→5→3 alone.
import { afterEach, it } from 'vitest';
import { startLoad } from '../testbed/load.ts';
import { BIG_STORE, BIG_STORE_MESSAGES, buildStore, formed, getCluster, scenario, seedSpec, sleep, waitForCluster, type Scenario } from '../e2e/harness.ts';
import { BENCH_RATE, catchUp, change, drainTime, operationRun, otherLeader, overheadOf, stepTimes, pushesOf, record, report, timeline, successors, type Recorder, type Row } from './measure.ts';

const MIN_READY_SECONDS = 5;
let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const pod = (id: number) => `queen-${id - 1}`;
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** One change of the voter count, measured; the load is the caller's. */
async function step(sc: Scenario, from: number, to: number): Promise<Omit<Row, 'pushes'>> {
  const before = await getCluster(sc);
  const leader = before.status?.leader ?? null;
  const rec = record(sc, { membership: true, raft: true });
  await rec.ready;
  await sleep(1000);
  const since = await change(sc, { replicas: to as 1 | 3 | 5 });
  const run = await operationRun(sc, rec, 'ScaleVoters', since);
  await sleep(1000);
  await rec.stop();
  const parts = to > from ? upFloor(rec, range(from + 1, to), since) : downFloor(rec, range(to + 1, from), since, leader);
  const floorMs = Object.values(parts).reduce((a, b) => a + b, 0);
  // The removed nodes whose pods restarted to hand leadership away: the one that led at the change,
  // and one that the election after it made leader in turn (not in the floor).
  const handedOff = range(to + 1, from).filter((id) => (rec.pods.get(pod(id)) ?? []).some((p) => p.seenAt >= since));
  const notes =
    to >= from || handedOff.length === 0
      ? undefined
      : handedOff.length === 1
        ? `node ${handedOff[0]}, removed, led: it was restarted once to hand leadership away`
        : `nodes ${handedOff.join(' and ')}, removed, led in turn: each was restarted once to hand leadership away (the floor counts node ${leader}'s)`;
  const drainMs = drainTime(rec, since);
  const steps = await stepTimes(sc, run, since);
  const overhead = await overheadOf(sc, rec, run, { totalMs: run.totalMs, floorMs, since });
  return { operation: `scale ${from}→${to}`, totalMs: run.totalMs, floorMs, floorParts: parts, run, drainMs, overhead, steps, notes, timeline: timeline(rec, since) };
}

function upFloor(rec: Recorder, ids: number[], since: number): Record<string, number> {
  let start = 0;
  let catching = 0;
  for (const id of ids) {
    const p = successors(rec, pod(id), since)[0];
    start = Math.max(start, p?.startedAt !== undefined ? p.startedAt - p.seenAt : NaN);
    const c = catchUp(rec, id, since);
    catching = Math.max(catching, c ? c.to - c.from : NaN);
  }
  return { 'the new pods start': start, 'the learners catch up': catching };
}

function downFloor(rec: Recorder, ids: number[], since: number, leader: number | null): Record<string, number> {
  let stop = 0;
  for (const id of ids) {
    // Its last pod: the one that went for good (one before it may have restarted to hand off).
    const p = (rec.pods.get(pod(id)) ?? []).at(-1);
    stop = Math.max(stop, p?.deletingAt !== undefined && p.deletingAt >= since && p.goneAt !== undefined ? p.goneAt - p.deletingAt : NaN);
  }
  const parts: Record<string, number> = { 'the removed pods stop': stop };
  if (leader !== null && ids.includes(leader)) {
    // The leader hands leadership away as its pod stops: from its first pod to stop since the
    // change until another node leads (its node leaves next; the rest of its stop and its successor
    // run beside what follows).
    const first = (rec.pods.get(pod(leader)) ?? []).find((p) => p.deletingAt !== undefined && p.deletingAt >= since);
    const led = first ? otherLeader(rec, leader, first.deletingAt!) : null;
    parts['the leader\'s hand-off'] = first && led !== null ? led - first.deletingAt! : NaN;
  }
  return parts;
}

async function pair(prefix: string, sim: Record<string, string> | undefined, store: boolean, there: number): Promise<Row[]> {
  s = await scenario(prefix, sim ? { sim } : {});
  await formed(s, seedSpec({ minReadySeconds: MIN_READY_SECONDS }));
  if (store) await buildStore(s, BIG_STORE_MESSAGES);
  await sleep(MIN_READY_SECONDS * 1000 + 1000);
  const rows: Row[] = [];
  for (const [from, to] of [[3, there], [there, 3]] as const) {
    const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: BENCH_RATE });
    await sleep(2000);
    const r = await step(s, from, to);
    rows.push({ ...r, pushes: await pushesOf(s, load) });
    // Ready for minReadySeconds before the next change, so it starts as this one did.
    await waitForCluster(s, `${to} voters Ready`, (q) => q.status?.phase === 'Ready' && q.status?.voters?.length === to, 120_000);
    await sleep(MIN_READY_SECONDS * 1000 + 1000);
  }
  await s.close();
  s = null;
  return rows;
}

/** Which pairs to run (QUEEN_BENCH_SCALE_TO: the far end of each, "5,1" by default: 3→5→3 on a store, then 3→1→3). */
const PAIRS = (process.env.QUEEN_BENCH_SCALE_TO ?? '5,1').split(',').map((x) => Number(x.trim()));

it('scale-voters: 3→5→3 and 3→1→3, total time against the floor, failed pushes, history events per step, first-step latency', async () => {
  const rows: Row[] = [];
  if (PAIRS.includes(5)) rows.push(...(await pair('benchscale', BIG_STORE, true, 5)));
  if (PAIRS.includes(1)) rows.push(...(await pair('benchone', undefined, false, 1)));
  report('scale-voters', rows);
});
