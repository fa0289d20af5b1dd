// `npm run bench -- replace`: the replacement of a follower and of the leader of 3 voters, each in
// a cluster of its own holding a store of about 200 MB (the e2e `replace` scenario's), under 200
// pushes a second. The floor: one restart (the old pod seen stopping until its successor, on an
// empty volume, has started) plus the new node's catch-up (in the leader's membership view, from
// the node first shown as a learner until it is live within the broker's promotion limit). What
// is not in it: the drain before the node leaves (out of the client Service's endpoints, then
// --drain-wait), the membership changes, and for the leader its hand-off (its pod stopped once
// so that it hands leadership away; printed beside). Printed and written under .cache/, not asserted.
import { afterEach, it } from 'vitest';
import { startLoad } from '../testbed/load.ts';
import { annotate, buildStore, formed, REPLACE_STORE, BIG_STORE_MESSAGES, scenario, seedSpec, sleep, type Scenario } from '../e2e/harness.ts';
import { BENCH_RATE, catchUp, drainTime, leftView, operationRun, overheadOf, stepTimes, pushesOf, record, report, timeline, type Row } from './measure.ts';

const MIN_READY_SECONDS = 5;
let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

async function measure(which: 'follower' | 'leader'): Promise<Row> {
  s = await scenario(`benchrep${which[0]}`, { sim: REPLACE_STORE });
  const qc = await formed(s, seedSpec({ minReadySeconds: MIN_READY_SECONDS }));
  await buildStore(s, BIG_STORE_MESSAGES);
  await sleep(MIN_READY_SECONDS * 1000 + 1000);
  const leader = qc.status!.leader!;
  const nodeId = which === 'leader' ? leader : [1, 2, 3].find((id) => id !== leader)!;
  const ordinal = nodeId - 1;
  const rec = record(s, { membership: true, raft: true });
  await rec.ready;
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: BENCH_RATE });
  await sleep(2000);
  const since = Date.now();
  await annotate(s, { 'queenmq.com/replace-pod': `queen-${ordinal}` });
  const run = await operationRun(s, rec, 'ReplaceNode', since);
  await sleep(1000);
  await rec.stop();
  const pushes = await pushesOf(s, load);
  // The pod on the empty volume is the last of the ordinal; the last one before it whose process
  // ran held the old volume (for the leader, the successor of its hand-off restart, which may still
  // be replaying its store when its node leaves): the restart is from its deletion, its graceful
  // stop included. A successor the StatefulSet made while the old claim went, which never ran
  // (labelled out of the client Service and deleted by the wipe all the same), is passed over: a
  // run counted from its deletion had a floor without the old pod's stop (1.8 s, not 4.0 s).
  const list = rec.pods.get(`queen-${ordinal}`) ?? [];
  const empty = list.at(-1);
  const before = list.slice(0, -1).reverse().find((i) => i.runningAt !== undefined);
  const wipe = empty?.startedAt !== undefined && empty.seenAt >= since && before?.deletingAt !== undefined ? empty.startedAt - before.deletingAt : NaN;
  const caught = catchUp(rec, nodeId, since);
  const parts: Record<string, number> = {
    'restart on an empty volume': wipe,
    'catch-up': caught ? caught.to - caught.from : NaN,
  };
  const floorMs = Object.values(parts).reduce((a, b) => a + b, 0);
  let notes = `node ${nodeId} (pod ${ordinal})`;
  const left = leftView(rec, nodeId, since);
  if (which === 'leader' && list[0]?.deletingAt !== undefined && left !== null) {
    const handOff = left - list[0].deletingAt;
    notes += `; its hand-off (the leader's pod stopping until its node left the membership) took ${(handOff / 1000).toFixed(1)}s, not in the floor (with it the ratio is ${(run.totalMs / (floorMs + handOff)).toFixed(2)})`;
  }
  const drainMs = drainTime(rec, since);
  const steps = await stepTimes(s, run, since);
  const overhead = await overheadOf(s, rec, run, { totalMs: run.totalMs, floorMs, since });
  const row: Row = { operation: `replace the ${which}`, totalMs: run.totalMs, floorMs, floorParts: parts, pushes, run, drainMs, overhead, steps, notes, timeline: timeline(rec, since) };
  await s.close();
  s = null;
  return row;
}

it('replace: a follower and the leader, total time against the floor, failed pushes, history events per step, first-step latency', async () => {
  const rows: Row[] = [];
  for (const which of ['follower', 'leader'] as const) rows.push(await measure(which));
  report('replace', rows);
});
