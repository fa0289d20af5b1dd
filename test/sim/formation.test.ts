// Formation (§3.1): founders started in any order, the fresh-node wait while a peer is silent,
// the raft token, image version and boot failures.

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, sleep, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

describe('formation', () => {
  it('three founders started in any order form one cluster with one leader', async () => {
    const c = (cluster = new SimCluster({ env: { QUEEN_SIM_IMAGE: 'ghcr.io/queen-mq/queen:2.5.1' } }));
    const order = [3, 1, 2].sort(() => Math.random() - 0.5);
    for (const id of order) {
      c.start(id);
      await sleep(300);
    }
    const leader = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    for (const id of [1, 2, 3]) {
      await waitFor(`node ${id} applied the founding entries`, async () => {
        const h = await c.health(id);
        return !isError(h) && h.json.raft.applied >= 2;
      });
    }
    const ids = new Set<string>();
    for (const id of [1, 2, 3]) {
      const h = await c.health(id);
      if (isError(h)) throw new Error(h.error);
      expect(h.json).toMatchObject({ status: 'healthy', engine: 'raft', version: '2.5.1' });
      expect(h.json.raft.role).toBe(id === leader.id ? 'leader' : 'follower');
      expect(h.json.raft.leader).toBe(true);
      expect(h.json.raft.applied).toBeGreaterThanOrEqual(2);
      const m = await c.membership(id);
      expect(m.source).toBe('leader');
      expect(m.nodeId).toBe(leader.id);
      expect(m.voters).toEqual([1, 2, 3]);
      expect(m.learners).toEqual([]);
      expect(m.joint).toBeNull();
      const members = (await c.req(id, 'GET', '/api/v1/raft/members')).json;
      ids.add(members.clusterId);
    }
    expect(ids.size).toBe(1);
  });

  it('a fresh founder keeps waiting (HTTP port closed) while a listed peer is silent', async () => {
    const c = (cluster = new SimCluster());
    c.start(1);
    c.start(2);
    // The raft port is bound early so that peers can probe the node's state...
    const st = await waitFor('node 1 raft port', async () => {
      const r = await c.raft(1, '/raft/v1/state');
      return r.status === 200 ? r.json : undefined;
    });
    expect(st).toMatchObject({ nodeId: 1, initialized: false, lastLogIndex: 0, kinds: 6 });
    // ...but no cluster is founded over an empty log while node 3 is silent: HTTP stays closed.
    await sleep(2500);
    for (const id of [1, 2]) {
      const h = await c.health(id);
      expect(h).toEqual({ error: 'refused' });
      expect(c.node(id).running).toBe(true);
    }
    expect((await c.raft(2, '/raft/v1/state')).json.initialized).toBe(false);
    c.start(3);
    await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    expect((await c.membership(3)).voters).toEqual([1, 2, 3]);
  });

  it('legacy builds (QUEEN_SIM_LEGACY=1) found the cluster over an empty log after 1.5 s', async () => {
    const c = (cluster = new SimCluster({ env: { QUEEN_SIM_LEGACY: '1' } }));
    c.start(1);
    c.start(2);
    const leader = await c.waitLeader([1, 2]);
    const m = await c.membership(leader.id);
    expect(m.voters).toEqual([1, 2, 3]);
    // Never heard from: counts from the election, so it turns non-live after the liveness window.
    await waitFor('node 3 not live', async () => {
      const mm = await c.membership(leader.id);
      const n3 = mm.members.find((x: { nodeId: number }) => x.nodeId === 3);
      return n3.live === false && n3.matched === null && n3.lag === null;
    });
  });

  it('raft RPCs need the token; a -bootfail image exits 1 with a FATAL line; bad env refuses to boot', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    await c.waitLeader();
    // A leader may be elected before node 1 has received the founding configuration.
    await c.waitHealthy([1, 2, 3]);
    expect((await c.raft(1, '/raft/v1/state', {}, null)).status).toBe(401);
    expect((await c.raft(1, '/raft/v1/state', {}, 'wrong')).status).toBe(401);
    expect((await c.raft(1, '/raft/v1/state')).json).toMatchObject({ nodeId: 1, initialized: true, voters: [1, 2, 3] });

    // A node with another token: its RPCs are refused both ways, with a clear log line.
    await c.kill(2);
    c.start(2, { env: { QUEEN_RAFT_TOKEN: 'not-the-cluster-token' } });
    await waitFor('token refusal logged', async () => c.node(2).hasLog(/wrong or missing x-queen-raft-token/));
    const l = (await c.waitLeader([1, 3])).id;
    await waitFor('node 2 non-live', async () => (await c.membership(l)).members.find((x: { nodeId: number }) => x.nodeId === 2).live === false);
    await c.kill(2);
    c.start(2);
    await c.waitHealthy([2]);

    await c.kill(3);
    c.start(3, { env: { QUEEN_SIM_IMAGE: 'ghcr.io/queen-mq/queen:2.6.1-bootfail' } });
    expect(await c.waitExit(3)).toBe(1);
    expect(c.node(3).logs().some((l) => l.level === 'FATAL')).toBe(true);

    c.start(3, { env: { HOSTNAME: 'queen' } }); // ordinal without trailing digits
    expect(await c.waitExit(3)).toBe(1);
    expect(c.node(3).hasLog(/trailing digits/)).toBe(true);

    c.start(3);
    await c.waitHealthy([3]);
    const info = await c.info(3);
    expect(info).toMatchObject({ pid: c.node(3).pid, nodeId: 3, version: '2.6.0', dataDir: c.dataDir(3) });
    // Healthy means a member in a term: usually a follower, the leader when it won an election
    // under load while it caught up (seen once in CI), never a candidate.
    expect(['follower', 'leader']).toContain(info.role);
    expect(info.clusterId).toMatch(/^[0-9a-f]{16}$/);

    // /_sim/crash: exit at once with the given code, no shutdown sequence.
    expect((await c.req(3, 'POST', '/_sim/crash', { code: 139 })).status).toBe(200);
    expect(await c.waitExit(3)).toBe(139);
    expect(c.node(3).hasLog(/shutdown complete/)).toBe(false);
  });
});
