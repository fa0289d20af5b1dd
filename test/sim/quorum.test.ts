// §5.6 quorum loss (and recovery), §3.6 force recover.

import * as fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, statusOf, SimCluster, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

const M = '/api/v1/system/raft/membership';

describe('§5.6 quorum loss', () => {
  it('survivor keeps leader:true then 503 (quorumAckMs > limit); puts hang; changes refused; one node back heals', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    c.start(4, { join: true });
    await waitFor('pod 4 answers', async () => !isError(await c.health(4)));
    expect((await c.req(L, 'POST', `${M}/learners`, { id: 4, raft: c.raftAddr(4), http: c.httpAddr(4) })).status).toBe(200);
    const [A, B] = [1, 2, 3].filter((id) => id !== L) as [number, number];

    // The survivor's last acknowledgement from A or B is at the latest now.
    const t0 = Date.now();
    await Promise.all([c.kill(A), c.kill(B)]);
    // Right after: still a leader, still 200 (the quorum figure is young).
    const h0 = await c.health(L);
    if (isError(h0)) throw new Error(h0.error);
    expect(h0.json.raft).toMatchObject({ role: 'leader', leader: true });
    // Then 503 once quorumAckMs passes QUEEN_RAFT_READY_QUORUM_MS (2000 in the tests).
    const h1 = await waitFor('survivor 503', async () => {
      const h = await c.health(L);
      return !isError(h) && h.status === 503 ? h : undefined;
    });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1500);
    expect(h1.json.status).toBe('settling');
    expect(h1.json.raft.leader).toBe(true);
    expect(h1.json.raft.quorumAckMs).toBeGreaterThan(2000);

    // The KV probe hangs (client timeout) on the survivor and on the learner.
    for (const id of [L, 4]) {
      const r = await c.put(id, `probe-${id}`, 1, 1000);
      expect(r).toEqual({ error: 'timeout' });
    }
    // Voter changes: no_quorum. A learner removal (no quorum check): busy, because the probe
    // writes above are stuck in flight on the leader (without them it would be 504 timeout).
    let r = await c.req(L, 'DELETE', `${M}/members/${A}`);
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('no_quorum');
    r = await c.req(L, 'PUT', `${M}/voters`, { voters: [L] });
    expect(r.json.code).toBe('no_quorum');
    r = await c.req(L, 'POST', `${M}/promote`, { ids: [4], force: true });
    expect(r.json.code).toBe('no_quorum');
    r = await c.req(L, 'DELETE', `${M}/members/4?timeoutMs=500`);
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('busy');

    // One node back: leader known and 200 within a few seconds.
    c.start(A);
    const t1 = Date.now();
    await c.waitHealthy([L, A], 10_000);
    expect(Date.now() - t1).toBeLessThan(8000);
    expect(statusOf(await c.put(A, 'after', 1))).toBe(200);
  });

  it('leader and one follower lost: the survivor keeps the old leader id, then 503; both back elect again', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    const [A, S] = [1, 2, 3].filter((id) => id !== L.id) as [number, number];
    // Both at once: S alone can never elect, so it keeps the old leader's term.
    await Promise.all([c.kill(L.id), c.kill(A)]);
    const h = await waitFor('survivor 503', async () => {
      const x = await c.health(S);
      return !isError(x) && x.status === 503 ? x : undefined;
    });
    expect(h.json.raft.role).toBe('follower');
    expect(h.json.raft.leader).toBe(true);
    expect(h.json.raft.term).toBe(L.term);
    const v = await c.membership(S);
    expect(v).toMatchObject({ source: 'follower', leader: L.id });
    c.start(A);
    const next = await c.waitLeader([A, S], 10_000);
    expect(next.term).toBeGreaterThan(L.term);
    await c.waitHealthy([A, S]);
  });
});

describe('§3.6 force recover', () => {
  it('permanent loss: QUEEN_RAFT_FORCE_RECOVER on the survivor makes it the only voter of a new cluster', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L, 10);
    const oldId = (await c.req(L, 'GET', '/api/v1/raft/members')).json.clusterId;
    const S = [1, 2, 3].find((id) => id !== L)!;
    // A majority committed every write; S may be the follower that has not applied the last ones yet.
    const h9 = await c.health(L);
    if (isError(h9)) throw new Error(h9.error);
    const commit = h9.json.raft.commit as number;
    await waitFor('S applied every write', async () => {
      const x = await c.health(S);
      return !isError(x) && x.json.raft.applied >= commit;
    });
    for (const id of [1, 2, 3]) await c.kill(id);

    // Naming another node refuses to boot.
    c.start(S, { env: { QUEEN_RAFT_FORCE_RECOVER: String(L) } });
    expect(await c.waitExit(S)).toBe(1);
    expect(c.node(S).hasLog(/names another node/)).toBe(true);

    c.start(S, { env: { QUEEN_RAFT_FORCE_RECOVER: String(S) } });
    await c.waitHealthy([S]);
    const m = await c.membership(S);
    expect(m).toMatchObject({ voters: [S], learners: [], leader: S });
    const h = await c.health(S);
    if (isError(h)) throw new Error(h.error);
    expect(h.json.raft.applied).toBeGreaterThanOrEqual(12);
    expect((await c.req(S, 'GET', '/api/v1/kv/test/k-9')).json).toMatchObject({ found: true, value: { i: 9 } });
    const newId = (await c.req(S, 'GET', '/api/v1/raft/members')).json.clusterId;
    expect(newId).not.toBe(oldId);
    expect(statusOf(await c.put(S, 'recovered', 1))).toBe(200);

    // Restarting with the variable still set while it is the only voter: no-op.
    await c.sigterm(S);
    c.start(S, { env: { QUEEN_RAFT_FORCE_RECOVER: String(S) } });
    await c.waitHealthy([S]);
    expect((await c.req(S, 'GET', '/api/v1/raft/members')).json.clusterId).toBe(newId);

    // Rebuild a second member, then the left-over variable refuses the boot.
    const R = [1, 2, 3].find((id) => id !== S)!;
    c.start(R, { join: true, wipe: true });
    await waitFor('rebuilt pod answers', async () => !isError(await c.health(R)));
    expect((await c.req(S, 'POST', `${M}/learners`, { id: R, raft: c.raftAddr(R), http: c.httpAddr(R) })).status).toBe(200);
    await waitFor('caught up', async () => {
      const mm = await c.membership(S);
      const x = mm.members.find((y: { nodeId: number }) => y.nodeId === R);
      return x.matched !== null && x.lag === 0 && x.live;
    });
    expect((await c.req(S, 'POST', `${M}/promote`, { ids: [R] })).status).toBe(200);
    await c.sigterm(S);
    c.start(S, { env: { QUEEN_RAFT_FORCE_RECOVER: String(S) } });
    expect(await c.waitExit(S)).toBe(1);
    expect(c.node(S).hasLog(/unset QUEEN_RAFT_FORCE_RECOVER/)).toBe(true);
    c.start(S);
    await c.waitHealthy([S, R]);
  });
});

describe('§3.6 force recover of a restored volume', () => {
  let restored: SimCluster | null = null;
  afterEach(async () => {
    await restored?.close();
    restored = null;
  });

  it('a follower\'s volume, copied and started as node 1 of a new cluster with QUEEN_RAFT_FORCE_RECOVER=1, takes its addresses from QUEEN_RAFT_PEERS and never reaches the source', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L, 10);
    const F = [1, 2, 3].find((id) => id !== L && id !== 1) ?? [1, 2, 3].find((id) => id !== L)!;
    const h = await c.health(L);
    if (isError(h)) throw new Error(h.error);
    const commit = h.json.raft.commit as number;
    await waitFor('F holds every write', async () => {
      const x = await c.health(F);
      return !isError(x) && x.json.raft.commit >= commit;
    });
    const sourceId = (await c.req(L, 'GET', '/api/v1/raft/members')).json.clusterId;
    // The copy of F's volume (taken with F stopped, as a snapshot of a crash would be); F comes back.
    await c.kill(F);
    const copy = (restored = new SimCluster({ size: 1, token: c.token }));
    fs.cpSync(c.dataDir(F), copy.dataDir(1), { recursive: true });
    c.start(F);
    // Node 1 of the new cluster: its own address, its peers list only itself.
    copy.start(1, { env: { QUEEN_RAFT_FORCE_RECOVER: '1' } });
    await copy.waitHealthy([1]);
    const m = await copy.membership(1);
    expect(m).toMatchObject({ voters: [1], learners: [], leader: 1 });
    expect(m.members).toEqual([expect.objectContaining({ nodeId: 1, raft: copy.raftAddr(1), http: copy.httpAddr(1) })]);
    expect((await copy.req(1, 'GET', '/api/v1/kv/test/k-9')).json).toMatchObject({ found: true, value: { i: 9 } });
    expect((await copy.req(1, 'GET', '/api/v1/raft/members')).json.clusterId).not.toBe(sourceId);
    expect(statusOf(await copy.put(1, 'restored', 1))).toBe(200);
    // The source goes on as it was: the same cluster, the same three voters, all healthy.
    await c.waitHealthy([1, 2, 3]);
    const source = await c.membership(L);
    expect(source.voters).toEqual([1, 2, 3]);
    expect((await c.req(L, 'GET', '/api/v1/raft/members')).json.clusterId).toBe(sourceId);
    expect((await c.req(L, 'GET', '/api/v1/kv/test/restored')).json).toMatchObject({ found: false });
  });
});
