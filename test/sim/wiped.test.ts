// §5.5 wiped voter (PVC deleted, member not removed): never repaired by itself; replace works.
// Variant F11: two wiped voters at once, no commit anywhere.

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, sleep, statusOf, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

const M = '/api/v1/system/raft/membership';
type Member = { nodeId: number; voter: boolean; matched: number | null; lag: number | null; live: boolean };
const member = (m: { members: Member[] }, id: number): Member => m.members.find((x) => x.nodeId === id)!;

describe('§5.5 wiped voter', () => {
  it('restarts empty, joins, stays at applied 0; 200 within the slack, 503 with epoch lag beyond; replace repairs it', async () => {
    // Slack of 40 entries instead of 1000 keeps the test short.
    const c = (cluster = new SimCluster({ env: { QUEEN_RAFT_READY_LAG_ENTRIES: '40' } }));
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L, 20);
    const [W, K] = [1, 2, 3].filter((id) => id !== L) as [number, number];
    // A majority committed the writes; W may acknowledge the last of them a moment later.
    const before = (await waitFor('W acknowledged every write', async () => {
      const w = member(await c.membership(L), W);
      return w.lag === 0 ? w : undefined;
    })).matched!;
    expect(before).toBeGreaterThanOrEqual(22);

    await c.kill(W);
    c.wipe(W);
    c.start(W); // no QUEEN_RAFT_JOIN: it probes, finds state, joins
    const h1 = await waitFor('wiped node answers with a leader', async () => {
      const h = await c.health(W);
      return !isError(h) && h.json.raft.leader === true ? h : undefined;
    });
    expect(c.node(W).hasLog(/this fresh node joins an existing cluster/)).toBe(true);
    expect(h1.json.raft).toMatchObject({ role: 'learner', leader: true, applied: 0 });
    // Within the slack: the residual 200.
    await waitFor('residual 200 within the slack', async () => statusOf(await c.health(W)) === 200);

    // The leader keeps it a voter with its pre-wipe matched; writes still succeed via the others.
    await c.writeMany(K, 30, 'more');
    const m = await c.membership(L);
    expect(member(m, W)).toMatchObject({ voter: true, matched: before });
    expect(member(m, W).lag).toBeGreaterThanOrEqual(30);
    expect(m.voters).toEqual([1, 2, 3]);

    // Beyond the slack: 503 with lag = ms since the epoch.
    const h2 = await waitFor('503 beyond the slack', async () => {
      const h = await c.health(W);
      return !isError(h) && h.status === 503 ? h : undefined;
    });
    expect(h2.json.raft.applied).toBe(0);
    expect(h2.json.raft.lag).toBeGreaterThan(1.7e12);
    expect(h2.json.raft.role).toBe('learner');

    // Never repaired by itself, not even across a leader change.
    await c.sigterm(L);
    c.start(L);
    await c.waitLeader([L, K]);
    await c.writeMany(K, 5, 'later');
    await sleep(1000);
    const h3 = await c.health(W);
    if (isError(h3)) throw new Error(h3.error);
    expect(h3.json.raft.applied).toBe(0);
    const L2 = (await c.waitLeader([L, K])).id;
    expect(member(await c.membership(L2), W).matched).toBe(before);
    // A write sent to the wiped node itself hangs until the statement timeout.
    const w = await c.put(W, 'via-wiped', 1, 5000);
    expect(isError(w) ? w.error : w.json.code).toBe('timeout');

    // Replace: DELETE -> wipe -> JOIN start -> learners -> promote.
    let r = await c.req(K, 'DELETE', `${M}/members/${W}`);
    expect(r.status).toBe(200);
    expect(r.json.membership.voters).toEqual([L, K].sort());
    await c.kill(W);
    c.wipe(W);
    c.start(W, { join: true });
    await waitFor('replacement answers', async () => !isError(await c.health(W)));
    r = await c.req(K, 'POST', `${M}/learners`, { id: W, raft: c.raftAddr(W), http: c.httpAddr(W) });
    expect(r.status).toBe(200);
    await waitFor('replacement caught up', async () => {
      const mm = await c.membership(K);
      const x = member(mm, W);
      return x.matched !== null && x.lag === 0 && x.live;
    });
    r = await c.req(L2, 'POST', `${M}/promote`, { ids: [W] });
    expect(r.status).toBe(200);
    expect(r.json.membership.voters).toEqual([1, 2, 3]);
    const done = await waitFor('replacement healthy', async () => {
      const h = await c.health(W);
      return !isError(h) && h.status === 200 && h.json.raft.role === 'follower' ? h : undefined;
    });
    expect(done.json.raft.applied).toBeGreaterThan(50);
  });

  it('F11: two wiped voters at once, nothing commits anywhere', async () => {
    const c = (cluster = new SimCluster({ env: { QUEEN_RAFT_READY_LAG_ENTRIES: '5' } }));
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L, 10);
    const wiped = [1, 2, 3].filter((id) => id !== L);
    for (const id of wiped) {
      await c.kill(id);
      c.wipe(id);
    }
    for (const id of wiped) c.start(id);
    for (const id of wiped) {
      await waitFor(`wiped ${id} joined`, async () => {
        const h = await c.health(id);
        return !isError(h) && h.json.raft.leader === true;
      });
    }
    // Puts hang on every pod until the statement timeout.
    for (const id of [1, 2, 3]) {
      const r = await c.put(id, `f11-${id}`, 1, 4000);
      expect(isError(r) ? r.error : r.json.code).toBe('timeout');
    }
    const m = await c.membership(L);
    expect(m.voters).toEqual([1, 2, 3]);
    for (const id of wiped) {
      const h = await c.health(id);
      if (isError(h)) throw new Error(h.error);
      expect(h.json.raft.applied).toBe(0);
    }
  });
});
