// Data that takes time in the test bed (issue 12, item 1): the simulator settings a scenario gives
// its namespace through the control API (message size, link and replay speeds) reach every Queen
// pod started there; the load client pushes 500 messages a second through the client Service and
// every acknowledged message is on every voter; a restarted pod replays its store before its port
// opens, and its startup probe waits for it.
import { afterAll, expect, it } from 'vitest';
import { checkSeedCluster, getJson, isReady, listPods, until } from './checks.ts';
import { connect, control } from './client.ts';
import { startLoad, verifyAcknowledgedDetail } from './load.ts';

const client = connect();
let ns = '';

afterAll(async () => {
  if (ns) await client.deleteNamespace(ns);
});

it('500 messages a second of 16 KiB each: every acknowledged message on every voter; the store grows by their size; a restarted pod replays it with its port closed', async () => {
  ns = await client.newNamespace('data');
  // 16 KiB messages, a link of 200 MB/s and a replay of 50 MB/s (simulated time).
  await control.setSimEnv(ns, { QUEEN_SIM_ENTRY_BYTES: '16Ki', QUEEN_SIM_BANDWIDTH: '200M', QUEEN_SIM_REPLAY_RATE: '50M' });
  await checkSeedCluster(client, ns);
  const pods = await listPods(client, ns, 'app=queen');
  const info = await control.pod(ns, 'queen-0');
  expect(info.containers[0]!.env.QUEEN_SIM_ENTRY_BYTES).toBe('16Ki');

  const load = startLoad({ kubeConfig: client.kubeConfig(), namespace: ns, service: 'queen', rate: 500, batch: 10 });
  await until('3000 messages acknowledged', async () => load.progress().acknowledged >= 3000, 120_000);
  const report = await load.stop();
  const seconds = report.durationMs / 1000;
  console.log(`load: ${report.acknowledged} of ${report.sent} acknowledged in ${seconds.toFixed(1)} s (${(report.acknowledged / seconds).toFixed(0)}/s), ${report.failedAttempts.length} failed attempts`);
  const ips = pods.map((p) => p.status.podIP as string);
  const verify = await verifyAcknowledgedDetail(report, ips);
  expect(verify.missing).toEqual([]);
  expect(report.acknowledged / seconds).toBeGreaterThan(400);

  // The store of every pod holds what was pushed: 16 KiB a message.
  for (const ip of ips) {
    const sim = await getJson(`http://${ip}:6632/_sim/info`);
    expect(sim.body.storeBytes).toBeGreaterThan(report.acknowledged * 16 * 1024);
  }

  // A restarted pod replays its store (about 50 MB at 250 MB/s here) before its port opens.
  const old = pods[1]!;
  await client.kube().delete(`/api/v1/namespaces/${ns}/pods/${old.metadata.name}`);
  const back = await until(
    'queen-1 back and Ready',
    async () => {
      const p = (await listPods(client, ns, 'app=queen')).find((x) => x.metadata.name === old.metadata.name);
      return p && p.metadata.uid !== old.metadata.uid && isReady(p) ? p : undefined;
    },
    120_000,
  );
  const log = await client.kubectl(['-n', ns, 'logs', back.metadata.name]);
  const replay = log.stdout.split('\n').find((l) => l.includes('"replaying the store"'));
  expect(replay).toBeDefined();
  expect(JSON.parse(replay!).bytes).toBeGreaterThan(report.acknowledged * 16 * 1024);
  const order = ['"replaying the store"', '"store replayed"', '"serving"'].map((m) => log.stdout.indexOf(m));
  expect(order).toEqual([...order].sort((a, b) => a - b));
});
