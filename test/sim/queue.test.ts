// The minimal queue: push acknowledged only after commit and local apply, duplicates are no-ops,
// pop consumes, and /_sim/committed lists every acknowledged push on every voter, in one order.
// Also the KV probe's validation (§1.5).

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

describe('queue and /_sim/committed', () => {
  it('every acknowledged push is on every voter; duplicates are no-ops; pop consumes each message once', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);

    const acked: string[] = [];
    const writer = async (via: number) => {
      for (let i = 0; i < 25; i++) {
        const items = [0, 1].map((j) => ({ queue: 'orders', partition: `p${j}`, payload: { via, i, j }, transactionId: `n${via}-${i}-${j}` }));
        const r = await c.req(via, 'POST', '/api/v1/push', { items });
        expect(r.status).toBe(201);
        expect(r.json).toHaveLength(2);
        for (const x of r.json) {
          expect(x.status).toBe('queued');
          expect(typeof x.messageId).toBe('string');
          acked.push(x.transactionId);
        }
      }
    };
    await Promise.all([writer(1), writer(2), writer(3)]);
    expect(acked).toHaveLength(150);

    // A repeated transactionId answers the same message id and adds nothing.
    const again = await c.req(2, 'POST', '/api/v1/push', { items: [{ queue: 'orders', payload: {}, transactionId: 'n1-0-0' }] });
    expect(again.status).toBe(201);
    expect(again.json[0]).toMatchObject({ transactionId: 'n1-0-0', status: 'duplicate' });
    // Same id in another queue is a different message.
    const other = await c.req(3, 'POST', '/api/v1/push', { items: [{ queue: 'other', payload: {}, transactionId: 'n1-0-0' }] });
    expect(other.json[0].status).toBe('queued');

    // Every voter applied every acknowledged push, once, in one order. (A node that did not answer
    // a push may trail by a heartbeat: wait until each has applied the writers' last entries.)
    const lists = await waitFor('every voter applied the acknowledged pushes', async () => {
      const out: string[][] = [];
      for (const id of [1, 2, 3]) {
        const r = await c.req(id, 'GET', '/_sim/committed?queue=orders');
        expect(r.status).toBe(200);
        out.push(r.json.transactionIds);
      }
      return out.every((l) => l.length >= acked.length) ? out : undefined;
    });
    for (const l of lists) {
      expect(l).toHaveLength(150);
      expect(new Set(l)).toEqual(new Set(acked));
      expect(l).toEqual(lists[0]);
    }

    // Pop consumes: batches of 40 from different nodes until empty (204, no body); each message exactly once.
    const popped: string[] = [];
    for (let k = 0; k < 10; k++) {
      const r = await c.req(1 + (k % 3), 'GET', '/api/v1/pop/queue/orders?batch=40');
      if (r.status === 204) break;
      expect(r.status).toBe(200);
      expect(r.json.messages.length).toBeGreaterThan(0);
      expect(r.json.messages.length).toBeLessThanOrEqual(40);
      for (const m of r.json.messages) popped.push(m.transactionId);
    }
    expect(popped.sort()).toEqual([...acked].sort());
    const rest = await c.req(2, 'GET', '/api/v1/pop/queue/orders?batch=10');
    expect(rest.status).toBe(204);
    expect(rest.json).toBeNull();
    expect((await c.req(3, 'GET', '/api/v1/pop/queue/never-pushed?batch=1')).status).toBe(204);
    // Partition filter.
    await c.req(1, 'POST', '/api/v1/push', { items: [{ queue: 'pq', partition: 'a', payload: 1, transactionId: 'a1' }, { queue: 'pq', partition: 'b', payload: 2, transactionId: 'b1' }] });
    const pb = await c.req(3, 'GET', '/api/v1/pop/queue/pq?batch=5&partition=b');
    expect(pb.json.messages.map((m: { transactionId: string }) => m.transactionId)).toEqual(['b1']);
    // Consumption does not change the committed list.
    expect((await c.req(3, 'GET', '/_sim/committed?queue=orders')).json.transactionIds).toHaveLength(150);

    // Bad requests.
    const none = await c.req(1, 'POST', '/api/v1/push', { items: [] });
    expect([none.status, none.json]).toEqual([201, []]);
    expect((await c.req(1, 'POST', '/api/v1/push', { items: 'x' })).status).toBe(400);
    expect((await c.req(1, 'POST', '/api/v1/push', { items: [{ payload: 1 }] })).status).toBe(400);
    expect((await c.req(1, 'POST', '/api/v1/push', 'nope')).status).toBe(400);
  });

  it('KV probe: validation, versions, preconditions, GET', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const F = [1, 2, 3].find((id) => id !== L)!;
    const kv = (body: unknown, path = '/api/v1/kv/probe/n1') => c.req(F, 'PUT', path, body);

    let r = await kv({ value: 1, ttlSeconds: 60 }, '/api/v1/kv/probe/n1?x=1');
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: 'kv_bad_request', reason: 'kv_no_query_string' });
    r = await kv({ value: 1 });
    expect(r.json.reason).toBe('kv_expiry_not_specified');
    r = await kv({ value: 1, ttlSeconds: 60, forever: true });
    expect(r.status).toBe(400);
    r = await kv({ value: 1, forever: true, key: 'k' });
    expect(r.json.reason).toBe('kv_field_in_path');
    r = await kv({ value: 'x'.repeat(70_000), forever: true });
    expect(r.status).toBe(413);

    r = await kv({ value: { at: 'x' }, ttlSeconds: 120 });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ index: 0, op: 'put', applied: true, key: 'n1', value: { at: 'x' } });
    const v1 = r.json.version as number;
    r = await kv({ value: 2, forever: true }, '/api/v1/kv/rec/a/b%2Fc');
    expect(r.json.key).toBe('a/b/c');
    expect(r.json.version).toBeGreaterThan(v1);
    r = await kv({ value: 3, forever: true, expect: 0 });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ applied: false, reason: 'exists', value: { at: 'x' }, version: v1 });
    r = await kv({ value: 3, forever: true, expect: v1 });
    expect(r.json.applied).toBe(true);
    r = await kv({ value: 4, forever: true, expect: 12345, required: true });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ applied: false, reason: 'version' });
    r = await kv({ value: 4, forever: true, expect: 3 }, '/api/v1/kv/probe/absent');
    expect(r.json).toMatchObject({ applied: false, reason: 'absent' });

    // Read back on the node that answered the write (it applied it before answering).
    const g = await c.req(F, 'GET', '/api/v1/kv/probe/n1');
    expect(g.json).toMatchObject({ found: true, value: 3 });
    expect(g.headers.get('etag')).toBe(`"${g.json.version}"`);
    expect((await c.req(F, 'GET', '/api/v1/kv/probe/none')).json).toEqual({ found: false });
    const h = await c.health(F);
    expect(isError(h) ? 0 : h.json.raft.applied).toBeGreaterThanOrEqual(7);
  });
});
