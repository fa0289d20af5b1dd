// Raft details the operator depends on (issue 12, item 4): what a new leader knows of the
// followers' progress (QUEEN_SIM_LEADER_PROGRESS: carried over from the last members view, or
// unknown until they answer), a read that needs a quorum round (ReadIndex), and partitions that
// cut one peer from one other.
import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, sleep, statusOf, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

type Member = { nodeId: number; voter: boolean; matched: number | null; lag: number | null; live: boolean };
const member = (m: { members: Member[] }, id: number): Member => m.members.find((x) => x.nodeId === id)!;

describe('what a new leader knows of the followers', () => {
  it.each(['carry', 'unknown'] as const)('QUEEN_SIM_LEADER_PROGRESS=%s: a wiped voter is stale under the leader that saw it; after a hand-off', async (mode) => {
    const c = (cluster = new SimCluster({ env: { QUEEN_SIM_LEADER_PROGRESS: mode } }));
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L, 20);
    const [W, K] = [1, 2, 3].filter((id) => id !== L) as [number, number];
    const before = (await waitFor('W acknowledged every write', async () => {
      const w = member(await c.membership(L), W);
      return w.lag === 0 ? w : undefined;
    })).matched!;
    await c.kill(W);
    c.wipe(W);
    c.start(W);
    await waitFor('the wiped voter answers', async () => !isError(await c.health(W)));
    await c.writeMany(K, 10, 'more');
    await sleep(500);
    // In both modes the leader that recorded its progress never moves it back: stale.
    expect(member(await c.membership(L), W).matched).toBe(before);
    expect((await c.info(W)).applied).toBe(0);

    // Leadership moves to K (a graceful stop of L hands it off).
    await c.sigterm(L);
    c.start(L);
    const L2 = (await c.waitLeader([L, K])).id;
    expect(L2).toBe(K);
    await c.writeMany(K, 5, 'later');
    if (mode === 'carry') {
      // The new leader took W's progress from the members view: still stale.
      await sleep(1000);
      expect(member(await c.membership(K), W).matched).toBe(before);
      expect((await c.info(W)).applied).toBe(0);
    } else {
      // The new leader knew nothing and backed off to what W holds: W is repaired.
      const last = (await c.membership(K)).lastLogIndex as number;
      await waitFor('W repaired by the new leader', async () => (await c.info(W)).applied >= last, 20_000);
      const w = member(await c.membership(K), W);
      expect(w.matched).toBeGreaterThanOrEqual(last);
    }
  });
});

describe('a read that needs a quorum round', () => {
  it('a leader cut off from its majority cannot serve a read; the majority side elects and serves it; the old leader reads the new value once back', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const [A, B] = [1, 2, 3].filter((id) => id !== L) as [number, number];
    expect(statusOf(await c.put(L, 'x', 'one'))).toBe(200);
    expect((await c.req(A, 'GET', '/api/v1/kv/test/x')).json).toMatchObject({ found: true, value: 'one' });

    await c.partition(L, A);
    await c.partition(L, B);
    // L still believes it leads for a while; its read cannot confirm a majority.
    const stale = await c.tryReq(L, 'GET', '/api/v1/kv/test/x', undefined, 5000);
    expect(isError(stale) ? stale.error : stale.status).toBe(503);
    if (!isError(stale)) expect(stale.json.code).toBe('retry');
    const N = (await c.waitLeader([A, B])).id;
    expect(statusOf(await c.put(N, 'x', 'two'))).toBe(200);
    expect((await c.req(N, 'GET', '/api/v1/kv/test/x')).json).toMatchObject({ found: true, value: 'two' });
    const still = await c.tryReq(L, 'GET', '/api/v1/kv/test/x', undefined, 5000);
    expect(isError(still) || still.status === 503).toBe(true);

    await c.partition(L, A, false);
    await c.partition(L, B, false);
    await waitFor('the old leader reads the new value', async () => {
      const r = await c.tryReq(L, 'GET', '/api/v1/kv/test/x', undefined, 3000);
      return !isError(r) && r.status === 200 && r.json.value === 'two';
    }, 20_000, 200);
  });
});

describe('partitions between two peers', () => {
  it('the leader cut from one follower: that follower is not live, settles (503), cannot write, does not win an election; the others serve; healed, it catches up', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const [F, G] = [1, 2, 3].filter((id) => id !== L) as [number, number];
    const term = (await c.membership(L)).term as number;

    await c.partition(L, F);
    await waitFor('F not live on the leader', async () => member(await c.membership(L), F).live === false, 10_000);
    await waitFor('F settles (503)', async () => statusOf(await c.health(F)) === 503, 10_000);
    // It cannot ask the leader (it waits out the 5 s of that fetch), so it answers its own view.
    const view = (await c.req(F, 'GET', '/api/v1/system/raft/membership', undefined, 10_000)).json.membership;
    expect(view.source).toBe('follower');
    expect(statusOf(await c.put(G, 'via-g', 1))).toBe(200);
    const viaF = await c.put(F, 'via-f', 1, 5000);
    expect(isError(viaF) ? viaF.error : viaF.json.code).toMatch(/timeout/);
    // G still hears from L and denies F's pre-votes: no election, the term stays.
    await sleep(1500);
    expect((await c.membership(L)).term).toBe(term);
    expect((await c.waitLeader()).id).toBe(L);

    await c.partition(L, F, false);
    await c.waitHealthy([F]);
    await waitFor('F live and caught up', async () => {
      const m = member(await c.membership(L), F);
      return m.live && m.lag === 0;
    }, 10_000);
  });

  it('two followers cut from each other: the leader reaches both, every node stays healthy and writes commit through each', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const [F, G] = [1, 2, 3].filter((id) => id !== L) as [number, number];
    await c.partition(F, G);
    await sleep(1500);
    for (const id of [L, F, G]) {
      expect(statusOf(await c.health(id))).toBe(200);
      expect(statusOf(await c.put(id, `k-${id}`, id))).toBe(200);
    }
    const m = await c.membership(L);
    expect(m.members.every((x: Member) => x.live)).toBe(true);
    expect((await c.waitLeader()).id).toBe(L);
  });
});
