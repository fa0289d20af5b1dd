// §5.1 Rolling restart with leader transfer, and SIGTERM with no live voter (§3.5).

import * as net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, statusOf, SimCluster, sleep, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

async function leaderCommit(c: SimCluster, leader: number): Promise<number> {
  const h = await c.health(leader);
  if (isError(h)) throw new Error(`leader ${leader}: ${h.error}`);
  return h.json.raft.commit;
}

// Restart one pod the way the operator does: SIGTERM, wait for exit 0, start it again on the same
// volume, wait for 200 and applied >= the leader's commit.
async function restartOne(c: SimCluster, id: number, others: number[]): Promise<{ sawRefused: boolean }> {
  expect(await c.sigterm(id)).toBe(0);
  expect(await c.health(id)).toEqual({ error: 'refused' });
  for (const o of others) expect(statusOf(await c.health(o))).toBe(200);
  c.start(id);
  let sawRefused = false;
  await waitFor(`node ${id} back, healthy and caught up`, async () => {
    const h = await c.health(id, 1000);
    if (isError(h)) {
      sawRefused ||= h.error === 'refused';
      return false;
    }
    if (h.status !== 200) return false;
    const l = await c.waitLeader(others.concat(id));
    return h.json.raft.applied >= (await leaderCommit(c, l.id)) - 1;
  });
  return { sawRefused };
}

describe('§5.1 rolling restart', () => {
  it('followers first, leader last: the leader hands off on SIGTERM, the others stay healthy', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const first = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(first.id, 20);
    const followers = [1, 2, 3].filter((id) => id !== first.id);

    for (const f of followers) {
      const r = await restartOne(c, f, [1, 2, 3].filter((x) => x !== f));
      expect(r.sawRefused).toBe(true); // connection refused while it finds the leader
      // The leader did not change while a follower restarted.
      expect((await c.waitLeader()).id).toBe(first.id);
    }

    // Watch /health on the other two while the leader gets SIGTERM.
    const others = followers;
    const blips = new Map<number, number>(others.map((id) => [id, 0]));
    let watching = true;
    const watcher = (async () => {
      const prev = new Map<number, number>(others.map((id) => [id, 200]));
      while (watching) {
        for (const id of others) {
          const h = await c.health(id, 2000);
          if (isError(h) && h.error === 'timeout') continue; // our own client, slow on a loaded machine: not an answer
          const s = isError(h) ? 0 : h.status;
          if (s !== 200 && prev.get(id) === 200) blips.set(id, blips.get(id)! + 1);
          prev.set(id, s);
        }
        await sleep(10);
      }
    })();

    const exit = c.sigterm(first.id);
    const next = await waitFor('another voter leads with a higher term', async () => {
      for (const id of others) {
        const h = await c.health(id, 500);
        if (!isError(h) && h.json.raft.role === 'leader' && h.json.raft.term > first.term) return { id, term: h.json.raft.term as number };
      }
      return undefined;
    }, 5000, 10);
    expect(await exit).toBe(0);
    watching = false;
    await watcher;

    // From the SIGTERM to the new leader's election, as the nodes' own logs time it (the test's polling
    // on a loaded machine would add its own delays).
    const at = (id: number, re: RegExp) => Date.parse(String(c.node(id).logs().findLast((l) => re.test(l.msg ?? ''))?.ts));
    const handOffMs = at(next.id, /^elected leader$/) - at(first.id, /^SIGTERM received/);
    expect(handOffMs).toBeGreaterThanOrEqual(0);
    expect(handOffMs).toBeLessThan(1000);
    expect(c.node(first.id).hasLog(/handing leadership off/)).toBe(true);
    expect(c.node(first.id).hasLog(/shutdown complete/)).toBe(true);
    for (const id of others) expect(blips.get(id)).toBeLessThanOrEqual(1);
    // The stopped pod refuses connections; the remaining pair serves writes.
    expect(await c.health(first.id)).toEqual({ error: 'refused' });
    expect(statusOf(await c.put(next.id, 'after-handoff', 1))).toBe(200);

    // The old leader comes back: refused, then healthy and caught up, as a follower.
    c.start(first.id);
    await waitFor('old leader back and caught up', async () => {
      const h = await c.health(first.id, 1000);
      if (isError(h) || h.status !== 200) return false;
      return h.json.raft.role === 'follower' && h.json.raft.applied >= (await leaderCommit(c, next.id)) - 1;
    });
    // No hand-back: the leadership stays where it went.
    expect((await c.waitLeader()).id).toBe(next.id);
  });

  it('SIGTERM with no voter acked within 1 s: no transfer, the rest elect after it exits', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const first = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    const others = [1, 2, 3].filter((id) => id !== first.id);
    for (const id of others) expect((await c.req(id, 'POST', '/_sim/isolate', { on: true })).json.isolated).toBe(true);
    // The leader no longer hears from anyone.
    await waitFor('both followers non-live on the leader', async () => {
      const m = await c.membership(first.id);
      return m.members.filter((x: { nodeId: number; live: boolean }) => x.nodeId !== first.id && !x.live).length === 2;
    });
    expect(await c.sigterm(first.id)).toBe(0);
    expect(c.node(first.id).hasLog(/no live voter to hand leadership to/)).toBe(true);
    expect(c.node(first.id).hasLog(/handing leadership off/)).toBe(false);
    // Nobody else took over meanwhile (the survivors were cut off).
    for (const id of others) {
      const h = await c.health(id);
      if (isError(h)) throw new Error(h.error);
      expect(h.json.raft.role).not.toBe('leader');
    }
    for (const id of others) await c.req(id, 'POST', '/_sim/isolate', { on: false });
    const t0 = Date.now();
    const next = await c.waitLeader(others, 10_000);
    expect(next.term).toBeGreaterThan(first.term);
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it('F11: SIGTERM to the leader and a follower at once: the hand-off goes to the follower that is itself terminating, which leads until its own shutdown hands off again', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const first = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(first.id, 10);
    // The hand-off's target is the voter with the most of the log among those that acked within
    // 1 s; both followers hold all of it, and the first of them by id is taken.
    const [dying, staying] = [1, 2, 3].filter((id) => id !== first.id) as [number, number];
    // A client's push is in flight on the follower (its body not sent yet): its shutdown drains it
    // (up to 30 s x the time factor), as a pod with clients does, so it is still there when the
    // leader's hand-off comes.
    const inFlight = net.connect(6632, c.ip(dying));
    await new Promise<void>((resolve) => inFlight.once('connect', () => resolve()));
    inFlight.write(`POST /api/v1/push HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"items":`);
    inFlight.on('error', () => undefined);
    await sleep(100);
    // Both get SIGTERM together, as a StatefulSet's pods deleted at once do.
    const exits = [c.sigterm(dying), c.sigterm(first.id)];
    // The terminating follower takes the leadership (its own elections are off, a transfer is not)...
    await waitFor('the terminating follower leads', async () => c.node(dying).hasLog(/"msg":"elected leader"/), 10_000);
    // ...and its shutdown hands it off again, to the one that stays.
    expect(await Promise.all(exits)).toEqual([0, 0]);
    expect(c.node(dying).hasLog(/handing leadership off/)).toBe(true);
    expect(c.node(dying).logs().find((l) => l.msg === 'handing leadership off')).toMatchObject({ target: staying });
    // The one that stays takes it over, alone: two of three voters are gone, and nothing commits (F11's end).
    await waitFor('the staying voter runs the transferred election', async () => c.node(staying).logs().some((l) => l.msg === 'starting election' && l.transfer === true));
    inFlight.destroy();
  });

  it('a leader killed is replaced once the lease has run out: no voter grants a vote within twice the election timeout', async () => {
    const c = (cluster = new SimCluster());
    c.startAll();
    const first = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    const others = [1, 2, 3].filter((id) => id !== first.id);
    await sleep(500);
    const killed = Date.now();
    await c.kill(first.id);
    // The lease is 2 x QUEEN_RAFT_ELECTION_MS (600 ms here) from the last heartbeat (50 ms apart):
    // no survivor leads before it has run out.
    while (Date.now() - killed < 500) {
      for (const id of others) {
        const h = await c.health(id, 200);
        if (!isError(h)) expect(h.json.raft.role).not.toBe('leader');
      }
      await sleep(20);
    }
    const next = await c.waitLeader(others, 10_000);
    expect(next.term).toBeGreaterThan(first.term);
  });
});
