// Queen pods in broker fleets (QUEEN_SIM_FLEET=1 for their namespace, through the control API's
// /sim/env): one fleet process per test bed node runs the simulators, and the kubelet stand-in
// does with them what it does with a process per pod. The seed cluster forms; a kill is exit 137
// and a restart on the same address and data; hold and release; exit 75 restarts in place;
// SIGTERM is the graceful exit 0; wipe; kubectl logs, --previous; SIGSTOP is refused (a node of a
// fleet has no process to freeze).
import { readFileSync } from 'node:fs';
import { afterAll, expect, it } from 'vitest';
import { checkSeedCluster, getJson, sendJson, until } from './checks.ts';
import { connect } from './client.ts';

const client = connect();
let ns = '';

afterAll(async () => {
  if (ns) await client.deleteNamespace(ns);
});

const container = (pod: any) => pod.status?.containerStatuses?.[0];
const getPod = (name: string) => client.kube().get<any>(`/api/v1/namespaces/${ns}/pods/${name}`);
const restartedWith = (name: string, restarts: number, exitCode: number) =>
  until(`${name} restarted (${restarts}) after exit ${exitCode}`, async () => {
    const cs = container(await getPod(name));
    return cs?.restartCount === restarts && cs.state?.running && cs.lastState?.terminated?.exitCode === exitCode ? cs : undefined;
  }, 60_000, 100);
const healthy = (ip: string) => until(`${ip} healthy`, async () => (await getJson(`http://${ip}:6632/health`, 2000)).status === 200, 60_000, 200);

it('Queen pods in broker fleets: the seed cluster forms; kill, hold, release, exit 75, SIGTERM, wipe and logs as with processes', async () => {
  ns = await client.newNamespace('fleet');
  await client.control.setSimEnv(ns, { QUEEN_SIM_FLEET: '1' });
  const r = await checkSeedCluster(client, ns);
  for (const p of r.pods) {
    const info = await client.control.pod(ns, p.name);
    expect(info.fleet).toBe(true);
    // A fleet node's id is pid-like, above any pid Linux gives out, and the simulator reports it.
    expect(info.pid).toBeGreaterThan(4_194_304);
    expect((await getJson(`http://${p.ip}:6632/_sim/info`)).body.pid).toBe(info.pid);
  }
  // One fleet process per test bed node holds them (the seed's anti-affinity: three nodes).
  const fleets = (await client.control.simFleets()).filter((x) => x.running && r.pods.some((p) => p.node === x.node));
  expect(fleets.length).toBe(3);
  expect(fleets.every((x) => x.pid > 0 && x.nodes >= 1)).toBe(true);
  const follower = r.pods.find((p) => p.name !== `queen-${r.leader! - 1}`)!;
  const { name, ip } = follower;
  const before = await client.control.pod(ns, name);

  // SIGKILL held: down (connection refused) until released, then back on its address and data.
  const killed = await client.control.kill(ns, name, { hold: true });
  expect(killed.running).toBe(false);
  expect(killed.lastExitCode).toBe(137);
  const refused = await getJson(`http://${ip}:6632/health`, 2000).then(() => false, (e) => /ECONNREFUSED/.test(String(e.code ?? e.message)));
  expect(refused).toBe(true);
  const released = await client.control.release(ns, name);
  expect(released.running).toBe(true);
  expect(released.pid).not.toBe(before.pid);
  expect(released.fleet).toBe(true);
  await restartedWith(name, 1, 137);
  expect((await getPod(name)).status.podIP).toBe(ip);
  await healthy(ip);
  expect((await getJson(`http://${ip}:6632/_sim/info`)).body.applied).toBeGreaterThan(0);

  // Exit 75 (as after staging a snapshot): restarted in place.
  expect((await sendJson('POST', `http://${ip}:6632/_sim/crash`, { code: 75 })).status).toBe(200);
  await restartedWith(name, 2, 75);
  await healthy(ip);

  // SIGTERM: the shutdown sequence, exit 0, restarted (the StatefulSet's restart policy is Always).
  await client.control.kill(ns, name, { signal: 'SIGTERM' });
  await restartedWith(name, 3, 0);
  const info = await client.control.pod(ns, name);
  expect(info.lastExitCode).toBe(0);
  const log = readFileSync(info.logPath, 'utf8');
  expect(log).toContain('"msg":"SIGTERM received; shutting down"');
  expect(log).toContain('"msg":"shutdown complete"');
  expect(log).toMatch(/container queen exited with code 0/);
  expect(log).toMatch(/container queen exited with code 75/);

  // kubectl logs through the kubelet API: this run, and the one before it.
  await healthy(ip);
  const now = await client.kubectl(['-n', ns, 'logs', name]);
  expect(now.code).toBe(0);
  expect(now.stdout).toContain('"msg":"serving"');
  expect(now.stdout).not.toContain('shutdown complete');
  const previous = await client.kubectl(['-n', ns, 'logs', name, '--previous']);
  expect(previous.stdout).toContain('"msg":"shutdown complete"');

  // A node of a fleet cannot be frozen.
  await expect(client.control.kill(ns, name, { signal: 'SIGSTOP' })).rejects.toThrow(/broker fleet/);

  // Wipe: killed, its volume emptied, started again empty: a fresh node that joins the cluster.
  await client.control.wipe(ns, name);
  await restartedWith(name, 4, 137);
  await until('the wiped node joins', async () => readFileSync(info.logPath, 'utf8').includes('this fresh node joins an existing cluster'), 60_000, 200);
});
