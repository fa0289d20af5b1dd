// The network the test bed imposes through QUEEN_SIM_NET_FILE (issue 12, items 2 and 5): a node
// cut off the network (its machine gone: nothing in or out, raft or HTTP), and the sources a
// NetworkPolicy refuses, per port. Requests that are dropped are never answered: the caller times
// out, as with packets lost on the way. Calls leave from the node's own address.
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, SimCluster, sleep, statusOf, waitFor } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

/** A GET from a chosen source address: the status, or 'timeout'. */
function getFrom(source: string, ip: string, port: number, pth: string, timeoutMs = 1500): Promise<number | 'timeout' | string> {
  return new Promise((resolve) => {
    const req = http.request({ host: ip, port, path: pth, method: port === 7400 ? 'POST' : 'GET', localAddress: source, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.setTimeout(timeoutMs, () => {
      req.destroy();
      resolve('timeout');
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    req.end();
  });
}

function netFile(c: SimCluster, id: number): string {
  return path.join(c.root, `net-${id}.json`);
}

function writeNet(c: SimCluster, id: number, rules: unknown): void {
  const f = netFile(c, id);
  fs.writeFileSync(`${f}.tmp`, JSON.stringify(rules));
  fs.renameSync(`${f}.tmp`, f);
}

describe('the network file', () => {
  it('refused sources get no answer on that port only; everyone else is served', async () => {
    const c = (cluster = new SimCluster());
    for (const id of [1, 2, 3]) c.start(id, { env: { QUEEN_SIM_NET_FILE: netFile(c, id) } });
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const intruder = `${c.subnet}.200`;
    const client = `${c.subnet}.201`;
    writeNet(c, L, { refuse: { '6632': [intruder], '7400': [client, intruder] } });
    await sleep(400);
    expect(await getFrom(intruder, c.ip(L), 6632, '/health')).toBe('timeout');
    expect(await getFrom(client, c.ip(L), 6632, '/health')).toBe(200);
    expect(await getFrom('127.0.0.1', c.ip(L), 6632, '/health')).toBe(200);
    // The raft port: only the cluster's own pods (here, a client is refused; the peers go on).
    expect(await getFrom(client, c.ip(L), 7400, '/raft/v1/state')).toBe('timeout');
    expect(statusOf(await c.put(L, 'still', 1))).toBe(200);
    const m = await c.membership(L);
    expect(m.members.every((x: { live: boolean }) => x.live)).toBe(true);
    writeNet(c, L, {});
    await sleep(400);
    expect(await getFrom(intruder, c.ip(L), 6632, '/health')).toBe(200);
  });

  it('a node cut off the network: nothing reaches it, it reaches nothing, the others go on; back, it catches up', async () => {
    const c = (cluster = new SimCluster());
    for (const id of [1, 2, 3]) c.start(id, { env: { QUEEN_SIM_NET_FILE: netFile(c, id) } });
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const F = [1, 2, 3].find((id) => id !== L)!;
    writeNet(c, F, { cutOff: true });
    await waitFor('F not live on the leader', async () => (await c.membership(L)).members.find((x: { nodeId: number }) => x.nodeId === F).live === false, 10_000);
    expect(await getFrom('127.0.0.1', c.ip(F), 6632, '/health')).toBe('timeout');
    expect(c.node(F).running).toBe(true);
    await c.writeMany(L, 20);
    writeNet(c, F, {});
    await c.waitHealthy([F]);
    const last = (await c.membership(L)).lastLogIndex;
    await waitFor('F caught up', async () => (await c.info(F)).applied >= last, 10_000);
  });
});
