// How a node ends, the same whether it has a process of its own (QUEEN_SIM_MODE=process) or runs
// in a broker fleet (QUEEN_SIM_MODE=fleet): a SIGKILL is abrupt (sockets closed at once, nothing
// written or logged afterwards, also in the middle of a SIGTERM shutdown), and an exception nothing
// catches ends the node with exit 1 and its stack in the log while the others serve on.
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, isError, SIM_MODE, SimCluster, sleep, waitFor } from './harness.ts';

let c: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, c);
  await c?.close();
  c = null;
});

/** Every file of the data dir: its size and modification time. */
function listing(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of fs.readdirSync(dir)) {
    const st = fs.statSync(path.join(dir, name));
    out[name] = `${st.size}@${st.mtimeMs}`;
  }
  return out;
}

/** An idle connection to ip:port, and a promise of how it ended. */
function openIdle(ip: string, port: number): Promise<{ ended: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: ip, port });
    s.once('error', reject);
    s.once('connect', () => {
      s.removeListener('error', reject);
      const ended = new Promise<string>((r) => {
        s.on('error', (e) => r((e as NodeJS.ErrnoException).code ?? 'error'));
        s.on('end', () => r('end'));
        s.on('close', () => r('close'));
      });
      resolve({ ended });
    });
  });
}

function connectError(ip: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ host: ip, port });
    s.once('connect', () => {
      s.destroy();
      resolve('connected');
    });
    s.once('error', (e) => resolve((e as NodeJS.ErrnoException).code ?? 'error'));
  });
}

describe(`how a node ends (${SIM_MODE} mode)`, () => {
  it('SIGKILL: its connections close at once, its ports refuse, nothing more is written or logged; the others go on', async () => {
    c = new SimCluster({ size: 3 });
    c.startAll();
    const L = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    const V = [1, 2, 3].find((id) => id !== L.id)!;
    const http = await openIdle(c.ip(V), 6632);
    const raft = await openIdle(c.ip(V), 7400);
    await c.writeMany(L.id, 5, 'before');

    const killedAt = Date.now();
    expect(await c.kill(V, 'SIGKILL')).toBe(137);
    const how = await Promise.race([Promise.all([http.ended, raft.ended]), sleep(1000).then(() => null)]);
    expect(how, 'the idle connections to the killed node end').not.toBeNull();
    expect(Date.now() - killedAt).toBeLessThan(1000);
    expect(await connectError(c.ip(V), 6632)).toBe('ECONNREFUSED');
    expect(await connectError(c.ip(V), 7400)).toBe('ECONNREFUSED');

    const files = listing(c.dataDir(V));
    const lines = c.node(V).lines.length;
    // The rest commit more (which the killed follower would have written), and a state save and
    // several disk checks would have come by.
    await c.writeMany(L.id, 30, 'after');
    await sleep(1500);
    expect(listing(c.dataDir(V))).toEqual(files);
    expect(c.node(V).lines.length).toBe(lines);
    const h = await c.health(L.id);
    expect(!isError(h) && h.status).toBe(200);
  });

  it('SIGKILL during the SIGTERM sequence: the node ends then, not at the end of its hand-off, and writes nothing more', async () => {
    c = new SimCluster({ size: 3 });
    c.startAll();
    const L = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L.id, 5);
    // The followers die: the leader, told to stop, tries to hand off to one that acked a moment
    // ago for 3 s.
    const others = [1, 2, 3].filter((id) => id !== L.id);
    await Promise.all(others.map((id) => c!.kill(id)));
    const code = c.sigterm(L.id);
    await waitFor('the hand-off under way', async () => c!.node(L.id).hasLog(/handing leadership off/), 2000, 10);
    const files = listing(c.dataDir(L.id));
    const lines = c.node(L.id).lines.length;
    const t0 = Date.now();
    expect(await c.kill(L.id, 'SIGKILL')).toBe(137);
    expect(await code).toBe(137);
    expect(Date.now() - t0).toBeLessThan(1000);
    await sleep(3500);
    expect(listing(c.dataDir(L.id))).toEqual(files);
    expect(c.node(L.id).lines.length).toBe(lines);
    expect(c.node(L.id).hasLog(/shutdown complete|hand-off did not complete/)).toBe(false);
  });

  it('an exception nothing catches (a timer, a rejection) ends that node with exit 1 and the error in its log; the others serve on', async () => {
    c = new SimCluster({ size: 3 });
    c.startAll();
    const L = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    const [A, B] = [1, 2, 3].filter((id) => id !== L.id) as [number, number];
    await c.req(A, 'POST', '/_sim/fault', { throw: 'timer' });
    expect(await c.waitExit(A)).toBe(1);
    expect(c.node(A).hasLog(/simulated bug: an exception nothing catches/)).toBe(true);
    await c.req(B, 'POST', '/_sim/fault', { throw: 'rejection' });
    expect(await c.waitExit(B)).toBe(1);
    expect(c.node(B).hasLog(/simulated bug: a rejection nothing handles/)).toBe(true);
    // The leader goes on (alone it has no quorum, but it runs and answers).
    const h = await c.health(L.id);
    expect(isError(h)).toBe(false);
    c.start(A);
    c.start(B);
    await c.waitHealthy([1, 2, 3]);
  });

  // A node in a fleet has no process of its own: its pid is an id the fleet gives it.
  it.skipIf(SIM_MODE === 'fleet')('/_sim/info reports the pid of the node\'s own OS process (process mode only: a node in a fleet has no process, its pid is the id the fleet gave it)', async () => {
    c = new SimCluster({ size: 1 });
    c.start(1);
    await c.waitHealthy([1]);
    const pid = (await c.info(1)).pid as number;
    expect(pid).toBe(c.node(1).child!.pid);
    expect(() => process.kill(pid, 0)).not.toThrow();
  });
});
