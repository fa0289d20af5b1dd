// The cluster link (test/sim/LINK.md): a standby cluster of three simulated nodes follows a source
// cluster of three over the Raft port with the link token; it refuses its clients' writes (503
// `standby`) and serves their reads; its lag is reported; the source checks the token; a standby
// is seeded from a source that purged its log; a promotion asked of a follower makes it an
// ordinary cluster holding what the source committed up to its position.

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, waitFor } from './harness.ts';

const TOKEN = 'the-links-own-token';
let clusters: SimCluster[] = [];
afterEach(async (ctx) => {
  for (const c of clusters) dumpLogsIfFailed(ctx, c);
  for (const c of clusters) await c.close();
  clusters = [];
});

function pair(opts: { sourceEnv?: Record<string, string>; standbyEnv?: Record<string, string>; standbySize?: number } = {}) {
  const source = new SimCluster({ env: { QUEEN_LINK_TOKEN: TOKEN, ...(opts.sourceEnv ?? {}) } });
  const addrs = [1, 2, 3].map((id) => source.raftAddr(id)).join(',');
  const standby = new SimCluster({
    size: opts.standbySize ?? 3,
    env: { QUEEN_LINK_SOURCE: addrs, QUEEN_LINK_SOURCE_TOKEN: TOKEN, QUEEN_LINK_STANDBY: 'true', ...(opts.standbyEnv ?? {}) },
  });
  clusters.push(source, standby);
  return { source, standby };
}

/** A pair started, every node of both healthy. */
async function running(opts: Parameters<typeof pair>[0] = {}) {
  const p = pair(opts);
  p.source.startAll();
  p.standby.startAll();
  await p.source.waitHealthy([1, 2, 3]);
  await p.standby.waitHealthy([1, 2, 3]);
  return p;
}

async function push(c: SimCluster, id: number, n: number, queue = 'orders') {
  return c.tryReq(id, 'POST', '/api/v1/push', { items: [{ queue, partition: `p${n % 4}`, payload: { n }, transactionId: `t${n}` }] });
}

async function pushMany(c: SimCluster, from: number, to: number, via: (n: number) => number) {
  for (let n = from; n < to; n++) {
    const r = await push(c, via(n), n);
    if (isError(r) || r.status !== 201) throw new Error(`push ${n}: ${JSON.stringify(isError(r) ? r : r.json)}`);
  }
}

async function committed(c: SimCluster, id: number, queue = 'orders'): Promise<string[]> {
  return (await c.req(id, 'GET', `/_sim/committed?queue=${queue}`)).json.transactionIds;
}

async function link(c: SimCluster, id: number) {
  const r = await c.req(id, 'GET', '/api/v1/system/link');
  expect(r.status).toBe(200);
  return r.json;
}

/** Until the standby's leader follows, has nothing left to read, and every standby node holds what the source's leader holds. */
async function converged(source: SimCluster, standby: SimCluster, ids = [1, 2, 3]) {
  const s = (await source.waitLeader()).id;
  const want = await committed(source, s);
  return waitFor('the standby holds what its source holds', async () => {
    const b = (await standby.waitLeader(ids)).id;
    const st = await link(standby, b);
    if (st.follower?.state !== 'following' || st.follower.lagEntries !== 0) return undefined;
    for (const id of ids) if (JSON.stringify(await committed(standby, id)) !== JSON.stringify(want)) return undefined;
    return { leader: b, status: st, want };
  }, 20_000);
}

describe('cluster link', () => {
  it('a standby follows its source, refuses writes, serves reads, and a promotion through a follower makes it an ordinary cluster', async () => {
    const { source, standby } = await running();
    await pushMany(source, 0, 30, (n) => (n % 3) + 1);
    const first = await converged(source, standby);

    // Every node: writes refused with `standby` (push, KV put, pop), reads served.
    for (const id of [1, 2, 3]) {
      for (const r of [
        await push(standby, id, 9000),
        await standby.put(id, 'probe', { at: 1 }),
        await standby.tryReq(id, 'GET', '/api/v1/pop/queue/orders?batch=10'),
      ]) {
        if (isError(r)) throw new Error(r.error);
        expect(r.status).toBe(503);
        expect(r.json.code).toBe('standby');
        expect(r.headers.get('retry-after')).toBe('1');
      }
      const read = await standby.req(id, 'GET', '/api/v1/kv/test/nothing');
      expect(read.status).toBe(200);
    }
    // The link status: the leader follows, the others are idle; all say standby, with the same id.
    const st = first.status;
    expect(st).toMatchObject({ role: 'standby', leader: true, follower: { state: 'following', lagEntries: 0, lagMs: 0 } });
    expect(st.id).toMatch(/^[0-9a-f]{8}$/);
    expect(st.position.index).toBeGreaterThan(0);
    for (const id of [1, 2, 3].filter((i) => i !== first.leader)) {
      expect(await link(standby, id)).toMatchObject({ role: 'standby', leader: false, id: st.id, follower: { state: 'idle' } });
    }
    // /health carries the block, the metrics the series; every source node holds its log for the standby.
    const h = await standby.health(first.leader);
    if (isError(h)) throw new Error(h.error);
    expect(h.json.raft.link.role).toBe('standby');
    const metrics = await (await fetch(`http://${standby.ip(first.leader)}:6632/metrics/prometheus`)).text();
    expect(metrics).toContain('queen_link_role{role="standby"} 1');
    expect(metrics).toContain('queen_link_follower_state{state="following"} 1');
    expect(metrics).toMatch(/queen_link_lag_entries 0\n/);
    await waitFor('every source node holds its log for the standby', async () => {
      for (const id of [1, 2, 3]) if ((await link(source, id)).readers?.[0]?.name !== `standby-${st.id}`) return false;
      return true;
    });

    // The source's leader stops: the standby reads another node, and keeps up.
    const s = (await source.waitLeader()).id;
    await source.kill(s);
    const rest = [1, 2, 3].filter((id) => id !== s);
    await source.waitLeader(rest);
    await pushMany(source, 30, 50, (n) => rest[n % 2]!);
    const sl = (await source.waitLeader(rest)).id;
    const want = await waitFor('the standby replayed what the source took meanwhile', async () => {
      const w = await committed(source, sl);
      return w.length === 50 && JSON.stringify(await committed(standby, first.leader)) === JSON.stringify(w) ? w : undefined;
    }, 20_000);

    // Promotion asked of a follower of the standby; again, no error; writes taken on every node.
    const b = (await standby.waitLeader()).id;
    const follower = [1, 2, 3].find((id) => id !== b)!;
    const promoted = await standby.req(follower, 'POST', '/api/v1/system/link/promote', {});
    expect(promoted.status).toBe(200);
    expect(promoted.json).toMatchObject({ role: 'promoted' });
    expect(promoted.json.position.index).toBeGreaterThan(0);
    expect((await standby.req(b, 'POST', '/api/v1/system/link/promote', {})).json.role).toBe('promoted');
    for (const id of [1, 2, 3]) {
      const r = await push(standby, id, 100 + id);
      if (isError(r)) throw new Error(r.error);
      expect(r.status).toBe(201);
    }
    const after = await committed(standby, b);
    expect(after.slice(0, want.length)).toEqual(want);
    expect(after.slice(want.length).sort()).toEqual(['t101', 't102', 't103']);
    // A cluster that never was a standby refuses a promotion.
    const refused = await source.req(rest[0]!, 'POST', '/api/v1/system/link/promote', {});
    expect(refused.status).toBe(409);
    expect(refused.json.code).toBe('not_standby');
  }, 120_000);

  it('the source checks the token: a wrong one and a source without one are said in the follower\'s error', async () => {
    const { source, standby } = pair({ standbyEnv: { QUEEN_LINK_SOURCE_TOKEN: 'another-token' }, standbySize: 1 });
    source.startAll();
    standby.startAll();
    await source.waitHealthy([1, 2, 3]);
    await pushMany(source, 0, 5, () => 1);
    const st = await waitFor('the follower waits on the token', async () => {
      const s = await link(standby, 1);
      return s.follower?.state === 'waiting' ? s : undefined;
    });
    expect(st.follower.error).toMatch(/^http:\/\/[0-9.]+:7400\/link\/v1\/read: the source refused this standby's QUEEN_LINK_SOURCE_TOKEN$/);
    expect(await committed(standby, 1)).toEqual([]);
    // Straight to the route: no token and a wrong token are 401; a node without QUEEN_LINK_TOKEN serves no link (404).
    const call = (token: string | null) =>
      fetch(`http://${source.ip(1)}:7400/link/v1/read`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { 'x-queen-link-token': token } : {}) },
        body: JSON.stringify({ after: 0, afterTerm: 0, reader: 'a-test' }),
      });
    expect((await call(null)).status).toBe(401);
    expect((await call('wrong')).status).toBe(401);
    expect((await call(TOKEN)).status).toBe(200);
    // A seed that cannot be read fails the boot: the node does not start as a cluster of its own.
    const seeded = new SimCluster({ size: 1, env: { QUEEN_LINK_SOURCE: source.raftAddr(1), QUEEN_LINK_SOURCE_TOKEN: 'another-token', QUEEN_LINK_SEED: '1' } });
    clusters.push(seeded);
    seeded.start(1);
    expect(await seeded.waitExit(1)).toBe(1);
    expect(seeded.node(1).hasLog(/this node could not be seeded from its source: http:\/\/[0-9.]+:7400\/link\/v1\/snapshot: the source refused this standby's QUEEN_LINK_SOURCE_TOKEN/)).toBe(true);
    const plain = new SimCluster({ size: 1 });
    clusters.push(plain);
    plain.start(1);
    await plain.waitHealthy([1]);
    const none = await fetch(`http://${plain.ip(1)}:7400/link/v1/read`, { method: 'POST', headers: { 'x-queen-link-token': TOKEN }, body: '{}' });
    expect(none.status).toBe(404);
  }, 60_000);

  it('a standby seeded from a source that purged its log: one node takes the snapshot, the others join it', async () => {
    const { source, standby } = pair({
      sourceEnv: { QUEEN_RAFT_LOG_KEEP: '4' },
      standbyEnv: { QUEEN_LINK_STANDBY: '', QUEEN_LINK_SEED: '1' },
    });
    source.startAll();
    await source.waitHealthy([1, 2, 3]);
    await pushMany(source, 0, 60, () => 1);
    await waitFor('the source purged the start of its log', async () => (await source.req(1, 'GET', '/api/v1/raft/status')).json.purgedIndex > 0, 20_000);
    // An empty standby could not follow it: the start is gone.
    const empty = new SimCluster({ size: 1, env: { QUEEN_LINK_SOURCE: source.raftAddr(1), QUEEN_LINK_SOURCE_TOKEN: TOKEN, QUEEN_LINK_STANDBY: 'true' } });
    clusters.push(empty);
    empty.start(1);
    const halted = await waitFor('the empty standby halts', async () => {
      const s = await link(empty, 1);
      return s.follower?.state === 'halted' ? s : undefined;
    });
    expect(halted.follower.error).toMatch(/purged its log up to \d+ and this standby is at 0: it needs a new seed$/);

    standby.startAll();
    await standby.waitLeader([1]);
    expect(standby.node(1).hasLog(/seeded from the source's snapshot/)).toBe(true);
    expect(standby.node(2).hasLog(/QUEEN_LINK_SEED names node 1: this empty node waits to be added/)).toBe(true);
    expect((await standby.membership(1)).voters).toEqual([1]);
    await pushMany(source, 60, 70, () => 1);
    await converged(source, standby, [1]);
    for (const id of [2, 3]) {
      const r = await standby.req(1, 'POST', '/api/v1/system/raft/membership/learners', { id, raft: standby.raftAddr(id), http: standby.httpAddr(id) });
      expect(r.status).toBe(200);
    }
    // Each receives the seeded node's state as a snapshot, exits 75 once, and comes back on it.
    for (const id of [2, 3]) {
      expect(await standby.waitExit(id)).toBe(75);
      standby.start(id);
    }
    await waitFor('nodes 2 and 3 promoted', async () => (await standby.req(1, 'POST', '/api/v1/system/raft/membership/promote', { ids: [2, 3] })).status === 200, 30_000);
    await pushMany(source, 70, 80, () => 2);
    const done = await converged(source, standby);
    expect(done.status.role).toBe('standby');
    const r = await push(standby, 2, 9000);
    expect(!isError(r) && r.json.code).toBe('standby');
  }, 120_000);

  it('the source lost: the standby waits with the cause, and once promoted holds every source write stamped up to its position', async () => {
    const { source, standby } = await running();
    await pushMany(source, 0, 40, (n) => (n % 3) + 1);
    await converged(source, standby);
    for (const id of [1, 2, 3]) await source.kill(id);
    const b = (await standby.waitLeader()).id;
    const waiting = await waitFor('the follower says the source does not answer', async () => {
      const s = await link(standby, b);
      return s.follower?.state === 'waiting' && s.follower.lastAnswerMs > 1000 ? s : undefined;
    });
    expect(waiting.follower.error).toMatch(/^http:\/\/[0-9.]+:7400\/link\/v1\/read: /);
    const promoted = await standby.req(b, 'POST', '/api/v1/system/link/promote', {});
    expect(promoted.status).toBe(200);
    expect(await committed(standby, b)).toEqual(Array.from({ length: 40 }, (_, n) => `t${n}`));
  }, 90_000);
});
