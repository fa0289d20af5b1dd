// Peers by pod FQDN through the test bed's DNS server (QUEEN_SIM_DNS): a recreated pod on a new
// address is found again; an unresolvable peer is simply unreachable.

import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SimCluster, statusOf, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

type Member = { nodeId: number; raft: string; live: boolean; lag: number | null };

describe('peer names through QUEEN_SIM_DNS', () => {
  it('forms over FQDNs, follows a pod to its new IP, treats an unresolvable peer as unreachable', async () => {
    const c = (cluster = new SimCluster({ dns: true }));
    await c.startDns();
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const m = await c.membership(L);
    expect(m.members.map((x: Member) => x.raft)).toEqual([1, 2, 3].map((id) => `queen-${id - 1}.queen-headless.queen.svc.cluster.local:7400`));

    // The pod is recreated with another IP (same volume): the others re-resolve its name.
    const F = [1, 2, 3].find((id) => id !== L)!;
    expect(await c.sigterm(F)).toBe(0);
    const newIp = `${c.subnet}.${100 + F}`;
    c.start(F, { ip: newIp });
    await c.waitHealthy([F]);
    expect((await c.info(F)).pid).toBe(c.node(F).pid);
    await c.writeMany(L, 5);
    await waitFor('F live and caught up on the leader', async () => {
      const x = (await c.membership(L)).members.find((y: Member) => y.nodeId === F);
      return x.live && x.lag === 0;
    });

    // Its name disappears from DNS (pod deleted, not recreated): unreachable, non-live.
    await c.kill(F);
    c.dns!.delete(c.host(F));
    await waitFor('F non-live', async () => (await c.membership(L)).members.find((y: Member) => y.nodeId === F).live === false);
    expect(statusOf(await c.put(L, 'two-left', 1))).toBe(200);
    const h = await c.health(L);
    expect(isError(h) ? 0 : h.status).toBe(200);
  });
});
