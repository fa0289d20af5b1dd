// The cluster version (the broker's catalogue version, CHANGELOG 2.1.0 and 2.2.0): each build reads
// a catalogue version (/health raft.kinds); the leader raises the cluster's (raft.clusterVersion)
// once every member runs a build that reads a higher one, every QUEEN_RAFT_CLUSTER_VERSION_MS,
// never with 0; the raise is a log entry, so it survives restarts, a snapshot and a new learner's
// copy; from then on an older build refuses to boot on the data and cannot join.

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, sleep, statusOf, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

const M = '/api/v1/system/raft/membership';
const image = (v: string) => ({ QUEEN_SIM_IMAGE: `ghcr.io/queen-mq/queen:${v}` });

/** Every running node's /health catalogue figures. */
async function versions(c: SimCluster, ids: number[]): Promise<{ clusterVersion: number; kinds: number }[]> {
  const out: { clusterVersion: number; kinds: number }[] = [];
  for (const id of ids) {
    const h = await c.health(id);
    if (isError(h)) throw new Error(`node ${id}: ${h.error}`);
    out.push({ clusterVersion: h.json.raft.clusterVersion, kinds: h.json.raft.kinds });
  }
  return out;
}

const clusterAt = (c: SimCluster, ids: number[], v: number) =>
  waitFor(`every node at catalogue version ${v}`, async () => (await versions(c, ids)).every((x) => x.clusterVersion === v));

/** Restarts one node gracefully on another image, and waits for it to be healthy again. */
async function rollTo(c: SimCluster, id: number, version: string, extra: Record<string, string> = {}) {
  expect(await c.sigterm(id)).toBe(0);
  c.start(id, { env: { ...image(version), ...extra } });
  await c.waitHealthy([id]);
}

describe('the cluster version', () => {
  it('formed at the baseline and raised at once; held while a member reads less; raised to 7 once the last runs 2.7.0; an older build then refuses to boot', async () => {
    const c = (cluster = new SimCluster({ env: image('2.6.0') }));
    c.startAll();
    await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    // The founders write the baseline (3); the leader raises it to what every member reads (2.6.0: 6).
    await clusterAt(c, [1, 2, 3], 6);
    expect(await versions(c, [1, 2, 3])).toEqual([1, 2, 3].map(() => ({ clusterVersion: 6, kinds: 6 })));
    const leader = (await c.waitLeader()).id;
    const view = await c.membership(leader);
    expect(view.clusterVersion).toBe(6);
    expect(view.members.map((m: { kinds: number | null }) => m.kinds)).toEqual([6, 6, 6]);

    // Two of three on 2.7.0 (reads 7): the member on 2.6.0 holds the version at 6.
    const order = [1, 2, 3].filter((id) => id !== leader).concat(leader);
    await rollTo(c, order[0]!, '2.7.0');
    await rollTo(c, order[1]!, '2.7.0');
    await sleep(1000); // ten comparisons of the leader's (100 ms at the time factor 0.1)
    expect((await versions(c, [1, 2, 3])).map((x) => x.clusterVersion)).toEqual([6, 6, 6]);
    const held = await c.membership((await c.waitLeader()).id);
    expect(held.members.map((m: { nodeId: number; kinds: number }) => [m.nodeId, m.kinds]).sort()).toEqual(
      [1, 2, 3].map((id) => [id, id === order[2] ? 6 : 7]).sort(),
    );
    // A 2.6.0 still starts on the data of a node that ran 2.7.0: nothing is written in the new format yet.
    await rollTo(c, order[0]!, '2.6.0');
    await rollTo(c, order[0]!, '2.7.0');

    // The last one moves: the leader raises the version to 7, on every node.
    await rollTo(c, order[2]!, '2.7.0');
    await clusterAt(c, [1, 2, 3], 7);
    const now = (await c.waitLeader()).id;
    expect(c.node(now).hasLog(/every member reads effect catalogue version 7: raising the cluster version/)).toBe(true);

    // A 2.6.0 on any node's data now refuses to start: exit 1, a FATAL line naming both versions.
    const f = [1, 2, 3].find((id) => id !== now)!;
    expect(await c.sigterm(f)).toBe(0);
    c.start(f, { env: image('2.6.0') });
    expect(await c.waitExit(f)).toBe(1);
    expect(c.node(f).hasLog(/boot refused: the cluster's data writes catalogue version 7, and this binary \(2\.6\.0\) reads 6/)).toBe(true);
    // The cluster goes on with two, and the node comes back on 2.7.0.
    expect(statusOf(await c.put(now, 'after', 1))).toBe(200);
    c.start(f, { env: image('2.7.0') });
    await c.waitHealthy([f]);
  });

  it('QUEEN_RAFT_CLUSTER_VERSION_MS=0 keeps the way back open; the raise comes once the leader runs without it; it survives restarts, a snapshot and a new learner', async () => {
    const off = { QUEEN_RAFT_CLUSTER_VERSION_MS: '0' };
    const c = (cluster = new SimCluster({ env: { ...image('2.6.0'), QUEEN_RAFT_LOG_KEEP: '10' } }));
    c.startAll();
    let leader = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    await clusterAt(c, [1, 2, 3], 6);

    // Every node on 2.7.0 with the raise off: the version stays 6, and 2.6.0 still starts.
    for (const id of [1, 2, 3].filter((x) => x !== leader).concat(leader)) await rollTo(c, id, '2.7.0', off);
    await sleep(1000);
    expect((await versions(c, [1, 2, 3])).map((x) => [x.clusterVersion, x.kinds])).toEqual([[6, 7], [6, 7], [6, 7]]);
    leader = (await c.waitLeader()).id;
    const back = [1, 2, 3].find((id) => id !== leader)!;
    await rollTo(c, back, '2.6.0', off);
    await rollTo(c, back, '2.7.0', off);

    // Without the setting on the followers only: the leader, which still has it, raises nothing.
    const followers = [1, 2, 3].filter((id) => id !== leader);
    for (const id of followers) await rollTo(c, id, '2.7.0');
    await sleep(1000);
    expect((await versions(c, [1, 2, 3])).map((x) => x.clusterVersion)).toEqual([6, 6, 6]);
    // The leader restarts without it: leadership moves to a node that raises.
    await rollTo(c, leader, '2.7.0');
    await clusterAt(c, [1, 2, 3], 7);

    // It is in the log and the saved state: every node restarted at once keeps it.
    for (const id of [1, 2, 3]) await c.kill(id);
    c.startAll([1, 2, 3], { env: image('2.7.0') });
    await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    expect((await versions(c, [1, 2, 3])).map((x) => x.clusterVersion)).toEqual([7, 7, 7]);

    // A new learner whose copy comes as a snapshot (the log is purged: keep 10) reads it from the copy.
    leader = (await c.waitLeader()).id;
    await c.writeMany(leader, 60);
    await waitFor('the leader purged its log', async () => (await c.req(leader, 'GET', '/api/v1/raft/status')).json.purgedIndex > 0);
    c.start(4, { join: true, wipe: true, env: image('2.7.0') });
    await waitFor('pod 4 answers', async () => statusOf(await c.health(4)) === 503);
    const add = await c.req(leader, 'POST', `${M}/learners`, { id: 4, raft: c.raftAddr(4), http: c.httpAddr(4) });
    expect(add.status).toBe(200);
    expect(await c.waitExit(4)).toBe(75);
    c.start(4, { join: true, env: image('2.7.0') });
    await waitFor('the learner installed the snapshot and applied the raise', async () => {
      const h = await c.health(4);
      return !isError(h) && h.json.raft.applied > 0 && h.json.raft.clusterVersion === 7;
    });
    expect(c.node(4).hasLog(/installed the staged snapshot/)).toBe(true);
    // A 2.6.0 learner is refused: it reads less than the cluster.
    c.start(5, { join: true, wipe: true, env: image('2.6.0') });
    await waitFor('pod 5 answers', async () => statusOf(await c.health(5)) === 503);
    const refused = await c.req(leader, 'POST', `${M}/learners`, { id: 5, raft: c.raftAddr(5), http: c.httpAddr(5) });
    expect(refused.json).toMatchObject({ ok: false, code: 'kinds_behind' });
    expect(refused.json.error).toContain('reads catalogue version 6 but the cluster is at 7');
  });

  it('-breaksonraise: a build that is ready until the cluster reaches what it reads, then answers 503 for good', async () => {
    const c = (cluster = new SimCluster({ env: { ...image('2.6.0'), QUEEN_RAFT_CLUSTER_VERSION_MS: '0' } }));
    c.startAll();
    await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    // Held at the baseline (the raise is off): the broken 2.7.0 build serves and is ready.
    for (const id of [1, 2, 3]) await rollTo(c, id, '2.7.0-breaksonraise');
    expect((await versions(c, [1, 2, 3])).map((x) => [x.clusterVersion, x.kinds])).toEqual([[3, 7], [3, 7], [3, 7]]);
    // The raise on again, the leader last: 7 is reached, and every node turns 503 while it commits.
    const on = { ...image('2.7.0-breaksonraise'), QUEEN_RAFT_CLUSTER_VERSION_MS: '100' };
    const leader = (await c.waitLeader()).id;
    for (const id of [1, 2, 3].filter((x) => x !== leader)) await rollTo(c, id, '2.7.0-breaksonraise', on);
    expect(await c.sigterm(leader)).toBe(0);
    c.start(leader, { env: on });
    await waitFor('every node at 7, none ready', async () => {
      for (const id of [1, 2, 3]) {
        const h = await c.health(id);
        if (isError(h) || h.json.raft.clusterVersion !== 7 || h.status !== 503) return false;
      }
      return true;
    });
    const other = [1, 2, 3].find((id) => id !== leader)!;
    expect(statusOf(await c.put(other, 'still-commits', 1))).toBe(200);
  });
});

