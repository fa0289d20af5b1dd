// e2e `upgrade-template`: not only a new version rolls the pods: any change that reaches the pod
// template does (here the broker's environment and resources), one pod at a time, the leader
// last. One voter: its only pod restarts once.
import { afterEach, expect, it } from 'vitest';
import { clusterEvents, formed, getCluster, monitor, patchSpec, pods, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('upgrade-template: an env and resources change rolls every pod, the version stays', async () => {
  s = await scenario('template');
  const before = await formed(s, seedSpec());
  const leader = before.status!.leader!;
  await patchSpec(s, { env: [{ name: 'QUEEN_LOG_LEVEL', value: 'debug' }], resources: { requests: { cpu: '200m', memory: '128Mi' }, limits: { memory: '256Mi' } } });
  await waitForCluster(s, 'the roll done', (q) => q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded' && q.status?.phase === 'Ready', 300_000);
  const restarts = (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => e.message);
  expect(restarts).toHaveLength(3);
  expect(restarts.at(-1)).toBe(`restarting pod ${leader - 1}`);
  for (const p of await pods(s)) {
    const c = p.spec!.containers[0]!;
    expect(c.env?.find((e) => e.name === 'QUEEN_LOG_LEVEL')?.value).toBe('debug');
    expect(c.resources?.requests?.cpu).toBe('200m');
  }
  expect((await getCluster(s)).status?.version).toBe('2.6.0');
});

it('upgrade-template: one voter restarts once', async () => {
  s = await scenario('onevoter');
  await formed(s, seedSpec({ replicas: 1 }));
  const watch = await monitor(s);
  await patchSpec(s, { version: '2.6.1' });
  await waitForCluster(s, 'the pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 180_000);
  await watch.stop();
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => e.message)).toEqual(['restarting pod 0']);
  expect(watch.uids.get('queen-0')).toHaveLength(2);
});
