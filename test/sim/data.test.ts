// Data that takes time (issue 12, item 1): entries that count for QUEEN_SIM_ENTRY_BYTES, a boot
// that replays the store at QUEEN_SIM_REPLAY_RATE, and catch-up and snapshots that move at
// QUEEN_SIM_BANDWIDTH, all scaled by the time factor; a snapshot that cannot cross the link within
// 60 s + size / 10 MB/s gives up. The durations are the model's: each is asserted to take at least
// most of what the model says (a loaded machine only makes it longer) and printed as a ratio.
import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, sleep, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

const TF = 0.1; // FAST_ENV's time factor
const ENTRY = 256 * 1024;

// Pushes `n` entries through node `id`, `parallel` at a time, each acknowledged.
async function pushMany(c: SimCluster, id: number, n: number, prefix: string, parallel = 8): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const r = await c.tryReq(id, 'POST', '/api/v1/push', { items: [{ queue: 'q', payload: { i }, transactionId: `${prefix}-${i}` }] }, 10_000);
      if (isError(r) || r.status !== 201) throw new Error(`push ${prefix}-${i} through node ${id}: ${JSON.stringify(isError(r) ? r : r.json)}`);
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
}

const ratio = (actual: number, model: number) => `${(actual / 1000).toFixed(1)} s for a model of ${(model / 1000).toFixed(1)} s (x${(actual / model).toFixed(2)})`;

describe('data that takes time', () => {
  it('entries count for QUEEN_SIM_ENTRY_BYTES; a restarted follower replays its store with its port closed, then catches up at the bandwidth, slowly but moving', async () => {
    // 2 MB/s of link and 4 MB/s of replay in simulated time: 20 and 40 MB/s at the time factor 0.1.
    const bw = 2_000_000;
    const replay = 4_000_000;
    const c = (cluster = new SimCluster({ env: { QUEEN_SIM_ENTRY_BYTES: '256Ki', QUEEN_SIM_BANDWIDTH: String(bw), QUEEN_SIM_REPLAY_RATE: String(replay) } }));
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const F = [1, 2, 3].find((id) => id !== L)!;

    await pushMany(c, L, 160, 'before');
    // The pushes committed through the leader and one follower: F may still be receiving them.
    const lastLogIndex = async (id: number) => (await c.req(id, 'GET', '/api/v1/raft/status')).json.lastLogIndex as number;
    const lastBefore = await lastLogIndex(L);
    await waitFor('F holding every entry', async () => (await lastLogIndex(F)) >= lastBefore, 30_000, 25);
    const stored = (await c.info(F)).storeBytes as number;
    expect(stored).toBeGreaterThan(160 * ENTRY);
    // The disk counts them too, though no file holds the padding.
    expect((await c.info(F)).usedBytes).toBeGreaterThan(160 * ENTRY);

    expect(await c.sigterm(F)).toBe(0);
    await pushMany(c, L, 160, 'away');
    const leaderLast = (await c.membership(L)).lastLogIndex as number;

    // The boot replays the follower's store with both ports closed.
    const t0 = Date.now();
    c.start(F);
    await waitFor('the replay logged', async () => c.node(F).hasLog(/replaying the store/), 10_000);
    expect(statusOrError(await c.tryReq(F, 'GET', '/health', undefined, 500))).toBe('refused');
    await waitFor('the follower answers', async () => !isError(await c.health(F, 500)), 60_000, 25);
    const replayed = Date.now() - t0;
    const replayLine = c.node(F).logs().find((l) => l.msg === 'replaying the store')!;
    expect(replayLine.bytes).toBeGreaterThan(160 * ENTRY);
    const replayModel = ((replayLine.bytes as number) / replay) * 1000 * TF;
    console.log(`boot replay: ${ratio(replayed, replayModel)}`);
    expect(replayed).toBeGreaterThan(0.7 * replayModel);

    // Catch-up: 160 entries of 256 KiB over the link, the leader's `matched` moving in steps.
    const catchUpModel = ((160 * ENTRY) / bw) * 1000 * TF;
    const t1 = Date.now();
    const seen: number[] = [];
    let live = true;
    await waitFor(
      'the follower caught up',
      async () => {
        const m = await c.membership(L);
        const me = m.members.find((x: { nodeId: number }) => x.nodeId === F);
        if (me.matched !== null && me.matched !== seen.at(-1)) seen.push(me.matched);
        live &&= me.live === true;
        return me.matched !== null && me.matched >= leaderLast;
      },
      60_000,
      100,
    );
    const caughtUp = Date.now() - t1;
    console.log(`catch-up: ${ratio(caughtUp, catchUpModel)}, matched seen ${seen.join(' ')}`);
    expect(caughtUp).toBeGreaterThan(0.6 * catchUpModel);
    expect(seen.length).toBeGreaterThanOrEqual(5); // slow, but moving
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(live).toBe(true);
    await c.waitHealthy([F]);
  });

  it('a new learner waits for its snapshot as long as the link takes, stays live meanwhile, then restarts once (exit 75) and catches up', async () => {
    const bw = 1_000_000;
    const c = (cluster = new SimCluster({ size: 3, env: { QUEEN_SIM_ENTRY_BYTES: '256Ki', QUEEN_SIM_BANDWIDTH: String(bw), QUEEN_RAFT_LOG_KEEP: '10' } }));
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    await pushMany(c, L, 100, 'h');
    // The leader purges past what a new learner needs once its state is saved.
    await waitFor('the log purged', async () => (await c.req(L, 'GET', '/api/v1/raft/status')).json.purgedIndex > 10, 15_000);
    const snapshotModel = ((100 * ENTRY) / bw) * 1000 * TF;

    c.start(4, { join: true });
    await waitFor('node 4 answers', async () => !isError(await c.health(4, 500)), 10_000);
    const add = await c.req(L, 'POST', '/api/v1/system/raft/membership/learners', { id: 4, raft: c.raftAddr(4), http: c.httpAddr(4) });
    expect(add.status).toBe(200);
    const t0 = Date.now();
    let liveDuring = 0;
    let samples = 0;
    while (c.node(4).running) {
      const me = (await c.membership(L)).members.find((x: { nodeId: number }) => x.nodeId === 4);
      if (!c.node(4).running) break;
      expect(me.matched).toBeNull();
      samples++;
      if (me.live) liveDuring++;
      if (Date.now() - t0 > 30_000) throw new Error('the snapshot never arrived');
      await sleep(150);
    }
    const transfer = Date.now() - t0;
    console.log(`snapshot: ${ratio(transfer, snapshotModel)}, live in ${liveDuring} of ${samples} looks`);
    expect(await c.node(4).exited).toBe(75);
    expect(transfer).toBeGreaterThan(0.7 * snapshotModel);
    expect(liveDuring).toBeGreaterThanOrEqual(samples - 3); // live but for the first moment
    c.start(4, { join: true });
    await waitFor('node 4 caught up', async () => {
      const me = (await c.membership(L)).members.find((x: { nodeId: number }) => x.nodeId === 4);
      return me.matched !== null && me.lag <= 1;
    }, 30_000);
  });

  it('a snapshot that cannot cross the link within 60 s + size / 10 MB/s gives up, and the learner stays without one', async () => {
    // 100 KB/s for 7.7 MB: 77 s of transfer against a limit of 60.8 s (6.1 s at the time factor).
    const c = (cluster = new SimCluster({ size: 3, env: { QUEEN_SIM_ENTRY_BYTES: '256Ki', QUEEN_SIM_BANDWIDTH: '100k', QUEEN_RAFT_LOG_KEEP: '10' } }));
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    await pushMany(c, L, 30, 'h', 4);
    await waitFor('the log purged', async () => (await c.req(L, 'GET', '/api/v1/raft/status')).json.purgedIndex > 10, 30_000);
    c.start(4, { join: true });
    await waitFor('node 4 answers', async () => !isError(await c.health(4, 500)), 10_000);
    expect((await c.req(L, 'POST', '/api/v1/system/raft/membership/learners', { id: 4, raft: c.raftAddr(4), http: c.httpAddr(4) })).status).toBe(200);
    await waitFor('the transfer gives up', async () => c.node(L).hasLog(/snapshot transfer timed out/), 20_000, 200);
    expect(c.node(4).running).toBe(true);
    const me = (await c.membership(L)).members.find((x: { nodeId: number }) => x.nodeId === 4);
    expect(me.matched).toBeNull();
    const promote = await c.req(L, 'POST', '/api/v1/system/raft/membership/promote', { ids: [4] });
    expect(promote.status).toBe(409);
    expect(promote.json.code).toBe('learner_behind');
  });
});

function statusOrError(r: Awaited<ReturnType<SimCluster['tryReq']>>): number | string {
  return isError(r) ? r.error : r.status;
}
