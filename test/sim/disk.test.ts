// §5.8 disk gate (507) then disk full (stopped, process alive), healed by a bigger volume.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, statusOf, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

describe('§5.8 disk gate and disk full', () => {
  it('507 storage_full on the full node only; replication fills it to a stop; a bigger volume heals it', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const F = [1, 2, 3].find((id) => id !== L)!;
    const V = 400_000;
    // Give the follower a small volume (a restart, as a PVC of another size would).
    expect(await c.sigterm(F)).toBe(0);
    c.start(F, { env: { QUEEN_SIM_VOLUME_BYTES: String(V) } });
    await c.waitHealthy([F]);
    await c.writeMany(L, 10);

    const base = (await c.info(F)).usedBytes as number;
    expect(base).toBeGreaterThan(0);
    // 86 % used: the gate closes for this node's own clients.
    let f = await c.req(F, 'POST', '/_sim/fill', { bytes: Math.ceil(0.86 * V) - base });
    expect(f.json.gateClosed).toBe(true);
    const put = await c.req(F, 'PUT', '/api/v1/kv/test/gated', { value: 1, ttlSeconds: 60 });
    expect(put.status).toBe(507);
    expect(put.json).toEqual({ error: 'storage is full on at least one node', code: 'storage_full' });
    const push = await c.req(F, 'POST', '/api/v1/push', { items: [{ queue: 'q', payload: 1, transactionId: 'x1' }] });
    expect(push.status).toBe(507);
    expect((await c.req(F, 'GET', '/api/v1/pop/queue/q?batch=1')).status).toBe(507);
    // Other nodes still take writes, and replication still reaches the gated node.
    const other = [1, 2, 3].find((id) => id !== F && id !== L)!;
    expect(statusOf(await c.put(L, 'ok-1', 1))).toBe(200);
    expect(statusOf(await c.put(other, 'ok-2', 1))).toBe(200);
    const hF = await c.health(F);
    if (isError(hF)) throw new Error(hF.error);
    expect(hF.status).toBe(200);

    // Fill to just under 100 %: replication alone pushes it over, and the node stops.
    const used = (await c.info(F)).usedBytes as number;
    const filler = Math.ceil(0.86 * V) - base;
    f = await c.req(F, 'POST', '/_sim/fill', { bytes: filler + (V - used) - 3000 });
    expect(f.json.stopped).toBeNull();
    let i = 0;
    const stopped = await waitFor('the follower stops on a full disk', async () => {
      expect(statusOf(await c.put(L, `fill-${i++}`, { pad: 'x'.repeat(200) }))).toBe(200);
      const h = await c.health(F);
      return !isError(h) && h.json.raft.role === 'stopped' ? h : undefined;
    }, 20_000, 0);
    expect(stopped.status).toBe(503);
    expect(stopped.json.raft).toMatchObject({ storageReady: false, leader: false });
    expect(c.node(F).running).toBe(true);
    expect(c.node(F).hasLog(/ENOSPC|uses \d+ of \d+ bytes/)).toBe(true);
    // The cluster serves on the other two.
    expect(statusOf(await c.put(other, 'still-ok', 1))).toBe(200);
    await waitFor('F non-live on the leader', async () => {
      const m = await c.membership(L);
      return m.members.find((x: { nodeId: number }) => x.nodeId === F).live === false;
    });

    // Grow the volume and restart: caught up, gate open, 200.
    expect(await c.sigterm(F)).toBe(0);
    c.start(F, { env: { QUEEN_SIM_VOLUME_BYTES: String(20 * V) } });
    await c.waitHealthy([F]);
    const lh = await c.health(L);
    if (isError(lh)) throw new Error(lh.error);
    await waitFor('F caught up', async () => {
      const h = await c.health(F);
      return !isError(h) && h.json.raft.applied >= lh.json.raft.commit;
    });
    expect((await c.info(F)).gateClosed).toBe(false);
    expect(statusOf(await c.put(F, 'healed', 1))).toBe(200);
  });

  it('a file system that grows while the node runs (QUEEN_SIM_VOLUME_FILE): the gate moves with it, no restart', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const F = [1, 2, 3].find((id) => id !== L)!;
    const V = 400_000;
    const file = path.join(c.root, 'volume-F.json');
    fs.writeFileSync(file, JSON.stringify({ bytes: V }));
    expect(await c.sigterm(F)).toBe(0);
    c.start(F, { env: { QUEEN_SIM_VOLUME_BYTES: String(V), QUEEN_SIM_VOLUME_FILE: file } });
    await c.waitHealthy([F]);
    const base = (await c.info(F)).usedBytes as number;
    const f = await c.req(F, 'POST', '/_sim/fill', { bytes: Math.ceil(0.9 * V) - base });
    expect(f.json.gateClosed).toBe(true);
    expect((await c.req(F, 'PUT', '/api/v1/kv/test/gated', { value: 1, ttlSeconds: 60 })).status).toBe(507);
    const pid = c.node(F).pid;

    // The volume grows to twice its size under the running node: 45 % used, the gate reopens.
    fs.writeFileSync(`${file}.tmp`, JSON.stringify({ bytes: 2 * V }));
    fs.renameSync(`${file}.tmp`, file);
    await waitFor('the gate reopens', async () => (await c.info(F)).gateClosed === false, 5000);
    expect((await c.info(F)).volumeBytes).toBe(2 * V);
    expect(c.node(F).pid).toBe(pid);
    expect(c.node(F).hasLog(/file system changed size while running/)).toBe(true);
    expect(statusOf(await c.put(F, 'after-growth', 1))).toBe(200);
  });
});
