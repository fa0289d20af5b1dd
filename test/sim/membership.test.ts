// §5.2 add learner + promote, §5.3 remove a voter, §5.4 remove the leader.

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, statusOf, SimCluster, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

const M = '/api/v1/system/raft/membership';
type Member = { nodeId: number; voter: boolean; matched: number | null; lag: number | null; live: boolean; lastAckMs: number | null };
const member = (m: { members: Member[] }, id: number): Member | undefined => m.members.find((x) => x.nodeId === id);

describe('§5.2 add a learner, promote it after catch-up', () => {
  it('kinds_unknown before the pod answers; 200 learners=[4] matched null; exit 75 once; learner_behind until caught up; promote; no-op repeats', async () => {
    // Small log keep so the learner needs a snapshot (the optional exit-75 restart of pod 4).
    const c = (cluster = new SimCluster({ size: 3, env: { QUEEN_RAFT_LOG_KEEP: '10', QUEEN_RAFT_PROMOTE_MAX_LAG: '20' } }));
    c.startAll([1, 2, 3]);
    const leader = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(leader.id, 60);
    await waitFor('the leader purged its log', async () => (await c.req(leader.id, 'GET', '/api/v1/raft/status')).json.purgedIndex > 0);
    const follower = [1, 2, 3].find((id) => id !== leader.id)!;
    const add = { id: 4, raft: c.raftAddr(4), http: c.httpAddr(4) };

    // Pod 4 not running yet: the leader cannot ask it for its catalogue version.
    let r = await c.req(follower, 'POST', `${M}/learners`, add);
    expect(r.status).toBe(409);
    expect(r.json).toMatchObject({ ok: false, code: 'kinds_unknown' });

    // An older build is refused.
    c.start(4, { join: true, env: { QUEEN_SIM_IMAGE: 'ghcr.io/queen-mq/queen:2.0.0' } });
    await waitFor('pod 4 (2.0.0) answers', async () => statusOf(await c.health(4)) === 503);
    r = await c.req(leader.id, 'POST', `${M}/learners`, add);
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('kinds_behind');
    await c.kill(4);

    // Empty pod with QUEEN_RAFT_JOIN=true: binds at once, 503, role learner, no quorum view.
    c.start(4, { join: true, wipe: true });
    const h4 = await waitFor('pod 4 answers', async () => {
      const h = await c.health(4);
      return isError(h) ? undefined : h;
    });
    expect(h4.status).toBe(503);
    expect(h4.json.raft).toMatchObject({ role: 'learner', leader: false, quorumAckMs: null, applied: 0 });
    // Membership changes sent to it: 503 retry.
    r = await c.req(4, 'POST', `${M}/promote`, { ids: [4] });
    expect(r.status).toBe(503);
    expect(r.json.code).toBe('retry');
    expect(r.headers.get('retry-after')).toBe('1');

    // Add through a follower: 200 once committed, learners=[4], member 4 not replicated yet.
    r = await c.req(follower, 'POST', `${M}/learners`, add);
    expect(r.status).toBe(200);
    expect(r.json.ok).toBe(true);
    expect(r.json.membership.learners).toEqual([4]);
    expect(r.json.membership.voters).toEqual([1, 2, 3]);
    expect(member(r.json.membership, 4)).toMatchObject({ voter: false, matched: null, lag: null });

    // Promote right away: far behind (it needs a snapshot first).
    r = await c.req(leader.id, 'POST', `${M}/promote`, { ids: [4] });
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('learner_behind');

    // The log was purged: pod 4 gets a snapshot, stages it and exits 75; meanwhile matched is null.
    expect(await c.waitExit(4)).toBe(75);
    expect(c.node(4).hasLog(/snapshot received and staged/)).toBe(true);
    const during = await c.membership(leader.id);
    expect(member(during, 4)).toMatchObject({ matched: null, lag: null });
    r = await c.req(leader.id, 'POST', `${M}/promote`, { ids: [4] });
    expect(r.json.code).toBe('learner_behind');

    // The supervisor restarts it: it installs the snapshot and catches up, matched rises.
    c.start(4, { join: true });
    const caught = await waitFor('member 4 caught up', async () => {
      const m = await c.membership(leader.id);
      const m4 = member(m, 4);
      return m4 && m4.matched !== null && m4.lag !== null && m4.lag <= 20 && m4.live ? m4 : undefined;
    });
    expect(caught.matched).toBeGreaterThan(60);
    expect(c.node(4).hasLog(/installed the staged snapshot/)).toBe(true);
    await waitFor('pod 4 healthy as a learner', async () => {
      const h = await c.health(4);
      return !isError(h) && h.status === 200 && h.json.raft.role === 'learner';
    });

    // Promote: 200, four voters.
    r = await c.req(follower, 'POST', `${M}/promote`, { ids: [4] });
    expect(r.status).toBe(200);
    expect(r.json.membership.voters).toEqual([1, 2, 3, 4]);
    expect(r.json.membership.learners).toEqual([]);
    expect(r.json.membership.joint).toBeNull();
    const idx = r.json.membership.membershipIndex;
    // Repeats are no-ops.
    r = await c.req(4, 'POST', `${M}/promote`, { ids: [4] });
    expect(r.status).toBe(200);
    expect(r.json.membership.membershipIndex).toBe(idx);
    r = await c.req(leader.id, 'POST', `${M}/learners`, add);
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('already_voter');
    await waitFor('pod 4 follower', async () => {
      const h = await c.health(4);
      return !isError(h) && h.json.raft.role === 'follower';
    });
    // Pod 4 stayed up after its single exit 75.
    expect(c.history.filter((p) => p.id === 4 && p.exitCode === 75).length).toBe(1);
  });

  it('validation and idempotency of learner adds', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const leader = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    c.start(4, { join: true });
    await waitFor('pod 4 answers', async () => !isError(await c.health(4)));
    let r = await c.req(leader.id, 'POST', `${M}/learners`, '{not json');
    expect(r.status).toBe(400);
    expect(r.json.code).toBe('bad_request');
    r = await c.req(leader.id, 'POST', `${M}/learners`, { id: 4, raft: c.raftAddr(4) });
    expect(r.status).toBe(400);
    r = await c.req(leader.id, 'POST', `${M}/learners`, { id: 0, raft: c.raftAddr(4), http: c.httpAddr(4) });
    expect(r.json).toMatchObject({ ok: false, code: 'bad_request' });
    r = await c.req(leader.id, 'POST', `${M}/learners`, { id: 4, raft: 'nohost', http: c.httpAddr(4) });
    expect(r.json.code).toBe('bad_request');
    r = await c.req(leader.id, 'POST', `${M}/learners`, { id: 2, raft: c.raftAddr(2), http: c.httpAddr(2) });
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('already_voter');
    r = await c.req(leader.id, 'POST', `${M}/learners`, { nodeId: 4, raft: c.raftAddr(4), http: c.httpAddr(4) });
    expect(r.status).toBe(200);
    const idx = r.json.membership.membershipIndex;
    r = await c.req(leader.id, 'POST', `${M}/learners`, { id: 4, raft: c.raftAddr(4), http: c.httpAddr(4) });
    expect(r.status).toBe(200);
    expect(r.json.membership.membershipIndex).toBe(idx);
    r = await c.req(leader.id, 'POST', `${M}/learners`, { id: 4, raft: c.raftAddr(4), http: '127.0.0.1:1' });
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('address_mismatch');
    r = await c.req(leader.id, 'POST', `${M}/promote`, { ids: [] });
    expect(r.status).toBe(400);
    r = await c.req(leader.id, 'POST', `${M}/promote`, { ids: [9] });
    expect(r.status).toBe(400);
    expect(r.json.code).toBe('not_a_learner');
    r = await c.req(leader.id, 'PUT', `${M}/voters`, { voters: [1, 2, 9] });
    expect(r.status).toBe(400);
    expect(r.json.code).toBe('not_a_member');
    r = await c.req(leader.id, 'PUT', `${M}/voters`, { voters: [] });
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('last_voter');
    r = await c.req(leader.id, 'PUT', `${M}/voters`, { voters: [3, 2, 1] });
    expect(r.status).toBe(200);
    r = await c.req(leader.id, 'DELETE', `${M}/members/abc`);
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('`abc` is not a node id');
    // Removing a learner: single entry, gone.
    r = await c.req(leader.id, 'DELETE', `${M}/members/4`);
    expect(r.status).toBe(200);
    expect(r.json.membership.learners).toEqual([]);
  });
});

describe('§5.3 remove a voter', () => {
  it('leader_unreachable, timeout that still lands, in_flight, no_quorum, last_voter, no-op repeats', async () => {
    // Election timeout 3 s: the short isolations below stay inside the followers' leader lease, even
    // on a loaded machine, so no election races the timed-out change (which would drop it, as raft may).
    const c = (cluster = new SimCluster({ env: { QUEEN_RAFT_ELECTION_MS: '3000' } }));
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const [A, B] = [1, 2, 3].filter((id) => id !== L) as [number, number];

    // Through a follower whose leader link is broken: 503 leader_unreachable, nothing changed.
    await c.req(A, 'POST', '/_sim/isolate', { on: true });
    let r = await c.req(A, 'DELETE', `${M}/members/${B}`);
    expect(r.status).toBe(503);
    expect(r.json).toMatchObject({ ok: false, code: 'leader_unreachable' });
    await c.req(A, 'POST', '/_sim/isolate', { on: false });
    await waitFor('A live again', async () => member(await c.membership(L), A)!.live);
    expect((await c.membership(L)).voters).toEqual([1, 2, 3]);

    // A learner to remove while no commit is possible: 504 timeout, the lock stays taken
    // (in_flight), and the change lands once the followers are back.
    c.start(4, { join: true });
    await waitFor('pod 4 answers', async () => !isError(await c.health(4)));
    r = await c.req(L, 'POST', `${M}/learners`, { id: 4, raft: c.raftAddr(4), http: c.httpAddr(4) });
    expect(r.status).toBe(200);
    await c.req(A, 'POST', '/_sim/isolate', { on: true });
    await c.req(B, 'POST', '/_sim/isolate', { on: true });
    r = await c.req(L, 'DELETE', `${M}/members/4?timeoutMs=300`);
    expect(r.status).toBe(504);
    expect(r.json).toMatchObject({ ok: false, code: 'timeout' });
    r = await c.req(L, 'PUT', `${M}/voters`, { voters: [1, 2, 3] });
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('in_flight');
    const pending = await c.membership(L);
    expect(pending.membershipCommitted).toBe(false);
    expect(pending.changeInFlight).toBe(true);
    await c.req(A, 'POST', '/_sim/isolate', { on: false });
    await c.req(B, 'POST', '/_sim/isolate', { on: false });
    await waitFor('the timed-out removal lands', async () => {
      const m = await c.membership(L);
      return m.learners.length === 0 && m.membershipCommitted && !m.changeInFlight;
    });
    await c.kill(4);

    // One voter dead: removing the leader leaves {live follower, dead} -> no_quorum;
    // removing the dead one works.
    await c.kill(B);
    await waitFor('B non-live', async () => member(await c.membership(L), B)!.live === false);
    r = await c.req(A, 'DELETE', `${M}/members/${L}`);
    expect(r.status).toBe(409);
    expect(r.json).toMatchObject({ ok: false, code: 'no_quorum' });
    r = await c.req(A, 'DELETE', `${M}/members/${B}`);
    expect(r.status).toBe(200);
    expect(r.json.membership.voters).toEqual([L, A].sort());
    expect(member(r.json.membership, B)).toBeUndefined();
    // Repeat: 200, nothing written.
    const idx = r.json.membership.membershipIndex;
    r = await c.req(L, 'DELETE', `${M}/members/${B}`);
    expect(r.status).toBe(200);
    expect(r.json.membership.membershipIndex).toBe(idx);

    // Down to one voter, then the last one cannot go.
    r = await c.req(L, 'DELETE', `${M}/members/${A}?timeoutMs=5000`);
    expect(r.status).toBe(200);
    expect(r.json.membership.voters).toEqual([L]);
    r = await c.req(L, 'DELETE', `${M}/members/${L}`);
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('last_voter');
    // The single voter still commits writes.
    expect(statusOf(await c.put(L, 'alone', 1))).toBe(200);
  });

  it('a second change while the first is still committing is refused with in_flight', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    c.start(4, { join: true });
    await waitFor('pod 4 answers', async () => !isError(await c.health(4)));
    const others = [1, 2, 3].filter((id) => id !== L);
    for (const id of others) await c.req(id, 'POST', '/_sim/isolate', { on: true });
    // No quorum-check for a learner add: it waits for a commit that cannot happen.
    const slow = c.req(L, 'POST', `${M}/learners?timeoutMs=1500`, { id: 4, raft: c.raftAddr(4), http: c.httpAddr(4) });
    await waitFor('the learner entry is written', async () => (await c.membership(L)).learners.includes(4));
    const r = await c.req(L, 'DELETE', `${M}/members/${others[0]}`);
    expect(r.status).toBe(409);
    expect(r.json.code).toBe('in_flight');
    expect((await slow).status).toBe(504);
    for (const id of others) await c.req(id, 'POST', '/_sim/isolate', { on: false });
    await waitFor('committed', async () => (await c.membership(others[1]!)).membershipCommitted);
  });
});

describe('§5.4 remove the leader', () => {
  it('200, then the rest elect; the old leader is no member and turns 503', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L.id, 5);
    const rest = [1, 2, 3].filter((id) => id !== L.id);
    const r = await c.req(rest[0]!, 'DELETE', `${M}/members/${L.id}`);
    expect(r.status).toBe(200);
    expect(r.json.membership.voters).toEqual(rest);
    const next = await c.waitLeader(rest, 10_000);
    expect(rest).toContain(next.id);
    expect(next.term).toBeGreaterThan(L.term);
    const m = await c.membership(next.id);
    expect(m.voters).toEqual(rest);
    expect(member(m, L.id)).toBeUndefined();
    expect(m.source).toBe('leader');
    // Left running, the removed node's /health degrades to 503.
    const h = await waitFor('old leader 503', async () => {
      const x = await c.health(L.id);
      return !isError(x) && x.status === 503 ? x : undefined;
    }, 8000);
    expect(h.json.raft.role).not.toBe('leader');
    // Writes work on the remaining pair.
    expect(statusOf(await c.put(next.id, 'after', 1))).toBe(200);
  });
});
