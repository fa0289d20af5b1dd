// §5.9 snapshot / exit 75: a follower away past the purge hold gets a snapshot, exits 75 once,
// restarts, installs it and catches up. Also: the purge never passes a live follower.

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

type Member = { nodeId: number; matched: number | null; lag: number | null };

describe('§5.9 snapshot and exit 75', () => {
  it('away past the purge hold: exit 75 once, matched null meanwhile, then back and caught up', async () => {
    const c = (cluster = new SimCluster({ env: { QUEEN_RAFT_LOG_KEEP: '10', QUEEN_RAFT_PURGE_HOLD_S: '1' } }));
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const [F, K] = [1, 2, 3].filter((id) => id !== L) as [number, number];
    await c.writeMany(L, 10);
    await c.kill(F);
    const away = (await c.membership(L)).members.find((x: Member) => x.nodeId === F).matched as number;

    // While F is away, the log grows and is purged past what F holds (hold: 1 s).
    await c.writeMany(K, 60, 'away');
    const st = await waitFor('purged past the absent follower', async () => {
      const s = (await c.req(L, 'GET', '/api/v1/raft/status')).json;
      return s.purgedIndex > away ? s : undefined;
    });
    expect(st.purgedIndex).toBeLessThanOrEqual(st.appliedIndex - 10);
    // The live follower K held nothing back, but the purge never passed it either.
    const mK = (await c.membership(L)).members.find((x: Member) => x.nodeId === K);
    expect(mK.matched).toBeGreaterThanOrEqual(st.purgedIndex);

    // F returns: snapshot staged, exit 75.
    c.start(F);
    expect(await c.waitExit(F)).toBe(75);
    expect(c.node(F).hasLog(/snapshot received and staged/)).toBe(true);
    const mid = (await c.membership(L)).members.find((x: Member) => x.nodeId === F);
    expect(mid).toMatchObject({ matched: null, lag: null });

    // The supervisor restarts it: installed at boot, caught up, healthy, no second exit.
    const t0 = Date.now();
    c.start(F);
    await c.waitHealthy([F]);
    const lh = await c.health(L);
    if (isError(lh)) throw new Error(lh.error);
    const h = await waitFor('caught up', async () => {
      const x = await c.health(F);
      return !isError(x) && x.json.raft.applied >= lh.json.raft.commit ? x : undefined;
    });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(h.json.raft.role).toBe('follower');
    expect(c.node(F).hasLog(/installed the staged snapshot/)).toBe(true);
    expect(c.node(F).running).toBe(true);
    const st2 = (await c.req(F, 'GET', '/api/v1/raft/status')).json;
    expect(st2.snapshotIndex).toBeGreaterThan(away);
    // Data from before and during the absence is there.
    expect((await c.req(F, 'GET', '/api/v1/kv/test/away-59')).json.found).toBe(true);
    expect((await c.req(F, 'GET', '/api/v1/kv/test/k-0')).json.found).toBe(true);
    const m = (await c.membership(L)).members.find((x: Member) => x.nodeId === F);
    expect(m.matched).not.toBeNull();
    expect(c.history.filter((p) => p.id === F && p.exitCode === 75).length).toBe(1);
  });
});
