// §5.7 apply failure (poisoned entry) and QUEEN_RAFT_APPLY_SKIP.

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, statusOf, SimCluster, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

describe('§5.7 apply failure', () => {
  it('a poisoned entry stops every node; restarts do not help; a wrong digest refuses to boot; the right skip on all brings them back', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L, 5);
    const F = [1, 2, 3].find((id) => id !== L)!;
    const poison = await c.tryReq(F, 'PUT', '/api/v1/kv/test/poison', { value: { __queenSimPoison: true }, forever: true }, 4000);
    expect(isError(poison) ? 0 : poison.status).not.toBe(200);

    const failures = [];
    for (const id of [1, 2, 3]) {
      const h = await waitFor(`node ${id} stopped`, async () => {
        const x = await c.health(id);
        return !isError(x) && x.json.raft.role === 'stopped' ? x : undefined;
      });
      expect(h.status).toBe(503);
      expect(h.json.raft).toMatchObject({ leader: false, storageReady: false });
      expect(h.json.raft.apply.failure).toMatchObject({ index: expect.any(Number), term: expect.any(Number), digest: expect.stringMatching(/^[0-9a-f]+$/) });
      failures.push(h.json.raft.apply.failure);
      expect(c.node(id).running).toBe(true);
      expect(c.node(id).hasLog(/set QUEEN_RAFT_APPLY_SKIP=\d+:[0-9a-f]+ on EVERY node/)).toBe(true);
      expect((await c.membership(id)).source).toBe('stopped');
    }
    const { index, term, digest } = failures[0];
    for (const f of failures) expect({ index: f.index, term: f.term, digest: f.digest }).toEqual({ index, term, digest });
    // Writes on a stopped node: 503.
    const w = await c.put(L, 'while-stopped', 1);
    expect(isError(w) ? 0 : w.status).toBe(503);

    // Restarting replays and stops again.
    for (const id of [1, 2, 3]) expect(await c.sigterm(id)).toBe(0);
    c.startAll();
    for (const id of [1, 2, 3]) {
      await waitFor(`node ${id} stopped again`, async () => {
        const x = await c.health(id);
        return !isError(x) && x.json.raft.role === 'stopped' && x.json.raft.apply.failure?.index === index;
      });
    }

    // A wrong digest refuses to boot.
    for (const id of [1, 2, 3]) await c.sigterm(id);
    c.start(1, { env: { QUEEN_RAFT_APPLY_SKIP: `${index}:00000000deadbeef` } });
    expect(await c.waitExit(1)).toBe(1);
    expect(c.node(1).hasLog(/QUEEN_RAFT_APPLY_SKIP/)).toBe(true);

    // The right one on every node: back in service, the entry listed as skipped.
    c.startAll(undefined, { env: { QUEEN_RAFT_APPLY_SKIP: `${index}:${digest}` } });
    await c.waitHealthy([1, 2, 3]);
    for (const id of [1, 2, 3]) {
      const h = await c.health(id);
      if (isError(h)) throw new Error(h.error);
      expect(h.json.raft.apply).toEqual({ skipped: [{ index, term, digest }], failure: null });
    }
    const L2 = (await c.waitLeader()).id;
    expect(statusOf(await c.put(L2, 'after-skip', 1))).toBe(200);
    expect((await c.req(L2, 'GET', '/api/v1/kv/test/poison')).json).toEqual({ found: false });
    expect((await c.req(L2, 'GET', '/api/v1/kv/test/k-4')).json.found).toBe(true);

    // The variable can then be removed in a rolling restart.
    for (const id of [1, 2, 3]) {
      await c.sigterm(id);
      c.start(id);
      await c.waitHealthy([id]);
    }
    const h = await c.health(1);
    if (isError(h)) throw new Error(h.error);
    expect(h.json.raft.apply.skipped).toEqual([{ index, term, digest }]);
  });
});
