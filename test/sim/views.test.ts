// §5.10 joint configuration left behind, §5.11 follower views.

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

const M = '/api/v1/system/raft/membership';

describe('§5.10 joint configuration left behind', () => {
  it('leader dies between the two steps: joint visible, in_flight for all but PUT voters = last set, which finishes it', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    c.start(4, { join: true });
    await waitFor('pod 4 answers', async () => !isError(await c.health(4)));
    expect((await c.req(L, 'POST', `${M}/learners`, { id: 4, raft: c.raftAddr(4), http: c.httpAddr(4) })).status).toBe(200);
    await waitFor('learner 4 caught up', async () => {
      const m = await c.membership(L);
      const m4 = m.members.find((x: { nodeId: number }) => x.nodeId === 4);
      return m4.matched !== null && m4.lag === 0 && m4.live;
    });
    // Arm the fault: the leader exits right after the joint entry commits.
    expect((await c.req(L, 'POST', '/_sim/fault', { crashAfterJoint: true })).json.crashAfterJoint).toBe(true);
    const promote = await c.tryReq(L, 'POST', `${M}/promote`, { ids: [4] });
    expect(isError(promote) || promote.status !== 200).toBe(true);
    expect(await c.waitExit(L)).toBe(137);

    const rest = [1, 2, 3, 4].filter((id) => id !== L);
    const next = await c.waitLeader(rest, 10_000);
    const m = await waitFor('the new leader view', async () => {
      const v = await c.membership(rest.find((id) => id !== next.id)!);
      return v.source === 'leader' && v.membershipCommitted ? v : undefined;
    });
    expect(m.joint).toEqual([[1, 2, 3], [1, 2, 3, 4]]);
    expect(m.changeInFlight).toBe(true);
    expect(m.voters).toEqual([1, 2, 3, 4]);

    for (const [method, path, body] of [
      ['DELETE', `${M}/members/4`, undefined],
      ['PUT', `${M}/voters`, { voters: [1, 2, 3] }],
      ['POST', `${M}/promote`, { ids: [4] }],
      ['POST', `${M}/learners`, { id: 5, raft: c.raftAddr(5), http: c.httpAddr(5) }],
    ] as const) {
      const r = await c.req(next.id, method, path, body);
      expect(r.status).toBe(409);
      expect(r.json).toMatchObject({ ok: false, code: 'in_flight' });
    }
    const r = await c.req(rest[0]!, 'PUT', `${M}/voters`, { voters: [4, 3, 2, 1] });
    expect(r.status).toBe(200);
    expect(r.json.membership).toMatchObject({ joint: null, changeInFlight: false, voters: [1, 2, 3, 4], learners: [] });

    // The old leader comes back as a plain voter of the finished configuration.
    c.start(L);
    await c.waitHealthy([L]);
    expect((await c.membership(L)).voters).toEqual([1, 2, 3, 4]);
  });
});

describe('§5.11 follower views', () => {
  it("source 'leader' (verbatim) normally, own 'follower' view with viewAgeMs when the leader cannot be asked", async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L, 10);
    const F = [1, 2, 3].find((id) => id !== L)!;

    const viaF = await c.membership(F);
    expect(viaF).toMatchObject({ source: 'leader', nodeId: L, leader: L, viewAgeMs: 0 });
    const viaL = await c.membership(L);
    expect(viaF.term).toBe(viaL.term);
    expect(viaF.membershipIndex).toBe(viaL.membershipIndex);
    expect(Object.keys(viaF)).toEqual(Object.keys(viaL));
    expect(Object.keys(viaF)).toEqual([
      'nodeId', 'source', 'viewAgeMs', 'leader', 'term', 'voters', 'learners', 'joint', 'membershipIndex', 'membershipCommitted',
      'changeInFlight', 'lastLogIndex', 'committedIndex', 'liveWithinMs', 'promoteMaxLag', 'clusterVersion', 'members',
    ]);
    expect(Object.keys(viaF.members[0])).toEqual(['nodeId', 'voter', 'raft', 'http', 'matched', 'lag', 'lastAckMs', 'live', 'kinds']);

    // Cut F off: it answers from its own view, aged.
    await c.req(F, 'POST', '/_sim/isolate', { on: true });
    const own = await waitFor('an aged follower view', async () => {
      const v = await c.membership(F);
      return v.source === 'follower' && v.viewAgeMs >= 1200 ? v : undefined;
    });
    expect(own.nodeId).toBe(F);
    expect(own.leader).toBe(L);
    expect(own.voters).toEqual([1, 2, 3]);
    const lm = own.members.find((x: { nodeId: number }) => x.nodeId === L);
    // The leader's own entry = the highest matched in the view; figures aged by the view age.
    expect(lm.matched).toBe(Math.max(...own.members.map((x: { matched: number }) => x.matched)));
    expect(lm.lag).toBe(0);
    expect(lm.lastAckMs).toBeGreaterThanOrEqual(own.viewAgeMs - 5);
    expect(lm.live).toBe(false);
    // The /health of a cut-off follower turns 503 once its quorum view is too old.
    const h = await waitFor('503 on the cut-off follower', async () => {
      const x = await c.health(F);
      return !isError(x) && x.status === 503 ? x : undefined;
    });
    expect(h.json.raft.leader).toBe(true);
    expect(h.json.raft.quorumAckMs).toBeGreaterThan(2000);

    await c.req(F, 'POST', '/_sim/isolate', { on: false });
    await waitFor('leader view again', async () => (await c.membership(F)).source === 'leader');
    await c.waitHealthy([F]);
  });
});
