// The broken builds an upgrade's failure paths are tested with, chosen by the image tag as a real
// cluster would pull them: `-unready` runs and replicates but never reports itself ready (the
// upgrade's progress deadline), `-crashafter<N>` serves and then crashes N seconds later, again at
// every start (a canary that fails in its window). A good image on the same volume is healthy again.

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, sleep, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

describe('broken builds', () => {
  it('-unready stays 503 settling while the leader has it live and caught up; -crashafter serves, then exits 1; a good image heals', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const leader = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const other = [1, 2, 3].find((id) => id !== leader)!;

    await c.kill(other);
    c.start(other, { env: { QUEEN_SIM_IMAGE: 'ghcr.io/queen-mq/queen:2.6.1-unready' } });
    await waitFor(`node ${other} answers on -unready`, async () => !isError(await c.health(other)));
    await waitFor(`the leader hears from node ${other} and has it caught up`, async () => {
      const m = (await c.membership(leader)).members.find((x: { nodeId: number }) => x.nodeId === other);
      return m?.live === true && m.lag === 0;
    });
    // Writes commit through it, yet it never says it is ready.
    expect((await c.req(other, 'PUT', '/api/v1/kv/t/through-unready', { value: 1, ttlSeconds: 60 })).status).toBe(200);
    for (let i = 0; i < 5; i++) {
      const h = await c.health(other);
      expect(isError(h) ? h.error : [h.status, h.json.status, h.json.version]).toEqual([503, 'settling', '2.6.1-unready']);
      await sleep(400);
    }

    await c.kill(other);
    c.start(other, { env: { QUEEN_SIM_IMAGE: 'ghcr.io/queen-mq/queen:2.6.1-crashafter2' } });
    await c.waitHealthy([other]);
    expect(c.node(other).running).toBe(true);
    expect(await c.waitExit(other, 10_000)).toBe(1);
    expect(c.node(other).hasLog(/simulated crash: image .*-crashafter2 exits 2 s after it serves/)).toBe(true);

    c.start(other);
    await c.waitHealthy([other]);
    expect((await c.info(other)).version).toBe('2.6.0');
    expect((await c.req(other, 'PUT', '/api/v1/kv/t/after', { value: 2, ttlSeconds: 60 })).status).toBe(200);
  });
});
