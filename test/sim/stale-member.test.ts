// A node removed without hearing of it, left running on its data, and an empty node of the
// membership it knew: the empty node's vote makes the stale node lead (queen-broker-api 2.5: a
// removed node left running keeps its old state). A vote is granted on the log alone (Raft's rule,
// and openraft's vote handler, which compares the candidate's last log id with its own and does
// not look at the membership: inferred, test/sim/README.md), and an empty log is behind every
// other. This is why the operator empties every such volume in one step (plan/voters.ts wipeOldData).
import { afterEach, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, sleep, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

const M = '/api/v1/system/raft/membership';

it('a removed node that missed its removal leads with the vote of an emptied node, over a shorter log', async () => {
  const c = (cluster = new SimCluster({}));
  c.startAll();
  await c.waitHealthy([1, 2, 3]);
  // Node 1 leads (its pod stays); nodes 3 and 2 leave, in that order, as a scale-down to 1 does.
  for (let i = 0; i < 5 && (await c.waitLeader()).id !== 1; i++) {
    const l = (await c.waitLeader()).id;
    await c.sigterm(l);
    c.start(l);
    await c.waitHealthy([1, 2, 3]);
  }
  expect((await c.waitLeader()).id).toBe(1);
  await c.writeMany(1, 20);
  // Node 3 is cut off while it is removed: it never hears of the change.
  await c.partition(1, 3);
  await c.partition(2, 3);
  expect((await c.req(1, 'DELETE', `${M}/members/3`)).json.membership.voters).toEqual([1, 2]);
  await c.partition(1, 3, false);
  await c.partition(2, 3, false);
  await c.writeMany(1, 5, 'after');
  expect((await c.req(1, 'DELETE', `${M}/members/2`)).json.membership.voters).toEqual([1]);
  const committed = (await c.membership(1)).lastLogIndex as number;
  // While node 2 keeps its data, nothing changes: its log is ahead of node 3's.
  await sleep(4000);
  expect((await c.waitLeader([1])).id).toBe(1);

  // Node 2 comes back empty (its volume deleted, not yet added again).
  await c.kill(2);
  c.wipe(2);
  c.start(2);
  const stale = await waitFor('node 3 leads', async () => {
    const h = await c.health(3);
    return !isError(h) && h.json.raft.role === 'leader' ? h.json.raft : undefined;
  }, 15_000);
  expect(stale.applied).toBeLessThan(committed);
});
