// The broker fleet itself (fleet.ts, fleet-client.ts), whatever QUEEN_SIM_MODE says: a killed
// node leaves nothing running in the fleet process, the fleet's death is every node's (exit 137),
// it exits when the process that started it is gone, a node's log goes to the file it is given,
// and a node cannot be frozen. (The `unit-fleet` project does not run this file again.)
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { claimSubnet, dumpLogsIfFailed, node24, releaseSubnet, REPO_ROOT, SimCluster, simFleet, sleep, statusOf, waitFor } from './harness.ts';
import { FLEET_MAIN, SimFleet } from './fleet-client.ts';

let c: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, c);
  await c?.close();
  c = null;
});

const count = (xs: string[]) => xs.reduce<Record<string, number>>((m, x) => ((m[x] = (m[x] ?? 0) + 1), m), {});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('broker fleet', () => {
  it('nodes killed, crashed or stopped leave no timer, socket or server behind in the fleet process', async () => {
    const fleet = simFleet();
    await fleet.ready;
    await sleep(200);
    const before = count((await fleet.stats()).resources);
    c = new SimCluster({ size: 3, mode: 'fleet' });
    c.startAll();
    const L = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L.id, 20);
    const busy = await fleet.stats();
    expect(busy.nodes).toBe(3);
    expect(busy.resources.length).toBeGreaterThan(Object.values(before).reduce((a, b) => a + b, 0));
    const [A, B] = [1, 2, 3].filter((id) => id !== L.id) as [number, number];
    expect(await c.sigterm(A)).toBe(0);
    await c.req(B, 'POST', '/_sim/crash', { code: 42 });
    expect(await c.waitExit(B)).toBe(42);
    expect(await c.kill(L.id, 'SIGKILL')).toBe(137);
    await sleep(300);
    const after = await fleet.stats();
    expect(after.nodes).toBe(0);
    expect(count(after.resources)).toEqual(before);
  });

  it('the fleet process dies: each of its nodes exits 137; started again (a new fleet), they serve on their data', async () => {
    c = new SimCluster({ size: 3, mode: 'fleet' });
    c.startAll();
    const L = await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    await c.writeMany(L.id, 10);
    const fleet = simFleet();
    process.kill(fleet.pid, 'SIGKILL');
    expect(await Promise.all([1, 2, 3].map((id) => c!.waitExit(id)))).toEqual([137, 137, 137]);
    expect(statusOf(await c.health(1, 500))).toBe(0);
    expect(fleet.dead).toBe(true);
    c.startAll();
    expect(simFleet()).not.toBe(fleet);
    await c.waitLeader();
    await c.waitHealthy([1, 2, 3]);
    const r = await c.req(1, 'GET', '/api/v1/kv/test/k-9');
    expect(r.json).toMatchObject({ found: true, value: { i: 9 } });
  });

  it('a node writes its log to the file it is given; SIGSTOP cannot be sent to one node', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'queen-fleet-'));
    try {
      const fleet = simFleet();
      const log = path.join(dir, 'node.log');
      const n = fleet.start({ QUEEN_SIM_IMAGE: 'queen:2.6.1-bootfail', QUEEN_RAFT_DIR: dir, QUEEN_SIM_IP: '127.0.0.1' }, { log });
      expect(n.id).toBeGreaterThan(4_194_304);
      expect(await n.exited).toEqual({ code: 1, signal: null });
      expect(fs.readFileSync(log, 'utf8')).toMatch(/"level":"FATAL".*simulated -bootfail image/);
      c = new SimCluster({ size: 1, mode: 'fleet' });
      c.start(1);
      await c.waitHealthy([1]);
      expect(() => c!.node(1).kill('SIGSTOP')).toThrow(/cannot be sent to a simulated node in a fleet/);
      expect(statusOf(await c.health(1))).toBe(200);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits, and its nodes with it, when the process that started it is gone', async () => {
    // A parent process that starts a fleet with one node, says where, and exits.
    const script = `
      import { spawn } from 'node:child_process';
      import { SimFleet } from ${JSON.stringify(path.join(REPO_ROOT, 'test/sim/fleet-client.ts'))};
      setInterval(() => {}, 1000); // (the fleet's channel does not keep a process alive by itself)
      const fleet = new SimFleet((extra) => {
        const child = spawn(process.execPath, [${JSON.stringify(FLEET_MAIN)}], { env: { ...process.env, ...extra }, stdio: 'ignore', detached: true });
        child.unref();
        return { pid: child.pid, kill: () => child.kill('SIGKILL'), exited: new Promise((r) => child.on('exit', r)) };
      });
      const ip = process.argv[4];
      fleet.start({ QUEEN_SIM_IP: ip, PORT: process.argv[1], QUEEN_RAFT_LISTEN: ip + ':' + process.argv[2], QUEEN_RAFT_DIR: process.argv[3], QUEEN_SIM_TIME_FACTOR: '0.1' });
      await fleet.ready;
      for (const giveUp = Date.now() + 30000; ; ) {
        const ok = await fetch('http://' + ip + ':' + process.argv[1] + '/health').then((r) => r.status === 200, () => false);
        if (ok) break;
        if (Date.now() > giveUp) { console.error('the fleet node did not answer /health within 30 s'); process.exit(1); }
        await new Promise((r) => setTimeout(r, 50));
      }
      console.log(fleet.pid);
      process.exit(0);
    `;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'queen-fleet-'));
    // An address of its own (a subnet held as the harness holds its clusters'), so no server of
    // another test or of a test bed on this machine holds the ports.
    const subnet = claimSubnet();
    const ip = `${subnet}.1`;
    const httpPort = 6632;
    try {
      const parent = spawn(node24(), ['--input-type=module', '-e', script, String(httpPort), String(httpPort + 1), dir, ip], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      parent.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise<number | null>((r) => parent.on('exit', (x) => r(x)));
      expect(code).toBe(0);
      const fleetPid = Number(out.trim());
      expect(fleetPid).toBeGreaterThan(0);
      await waitFor('the fleet gone', async () => !isAlive(fleetPid), 5000, 50);
      const refused = await fetch(`http://${ip}:${httpPort}/health`).then(() => false, () => true);
      expect(refused).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
      releaseSubnet(subnet);
    }
  });
});

// (SimFleet is also the kubelet stand-in's: test/testbed/sim-fleets.ts.)
void SimFleet;
