// e2e `upgrade-drain` (issue 12, item 2): voluntary disruptions from others during an upgrade.
// Evictions (the Eviction API honours the disruption budget) aimed at the other pods whenever one
// is down, for the whole upgrade: the operator's own restarts are evictions too, counted by the
// budget, so the two never take two voters down together; a `kubectl drain` of a node that holds
// a voter finishes, one pod at a time, while the upgrade goes on. Never two voters down, nothing
// acknowledged lost, the upgrade ends Ready.
import { afterEach, expect, it } from 'vitest';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { clusterEvents, formed, kubectl, monitor, patchSpec, pods, scenario, seedSpec, sleep, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
const uncordon: string[] = [];
afterEach(async () => {
  for (const n of uncordon.splice(0)) await kubectl(['uncordon', n]);
  await s?.close();
  s = null;
});

async function evict(sc: Scenario, pod: string): Promise<number> {
  try {
    await sc.core.createNamespacedPodEviction({ namespace: sc.ns, name: pod, body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod, namespace: sc.ns } } });
    return 201;
  } catch (err) {
    return (err as { code?: number }).code ?? 0;
  }
}

it('upgrade-drain: evictions of other pods while the operator restarts one are refused by the budget', async () => {
  s = await scenario('upevict');
  await formed(s, seedSpec());
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 50 });
  const watch = await monitor(s);
  await patchSpec(s, { version: '2.6.1' });
  // Each time a pod of the cluster goes down, the others are asked to be evicted, again and again,
  // for as long as it is down (a drain or an autoscaler would).
  const outcomes: number[] = [];
  const evicted: string[] = [];
  let running = true;
  const evictor = (async () => {
    while (running) {
      const list = await pods(s!).catch(() => []);
      const down = list.filter((p) => p.metadata?.deletionTimestamp || !p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
      if (down.length === 1) {
        for (const p of list) {
          if (p === down[0] || p.metadata?.deletionTimestamp) continue;
          const code = await evict(s!, p.metadata!.name!);
          outcomes.push(code);
          // (A success is no fault in itself: the list is a moment old, and the pod seen down may be back.)
          if (code === 201) evicted.push(`${new Date().toISOString()} evicted ${p.metadata!.name} (${down[0]!.metadata!.name} was down a moment before)`);
        }
      }
      await sleep(20);
    }
  })();
  await waitForCluster(s, 'the upgrade done', (q) => q.status?.lastOperation?.type === 'RollingUpgrade' && q.status?.lastOperation?.result === 'Succeeded', 600_000);
  running = false;
  await evictor;
  const done = await waitForCluster(s, 'every pod on 2.6.1 and Ready', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 300_000);
  await watch.stop();
  const report = await load.stop();
  console.log(`upgrade-drain (evictions): ${outcomes.filter((c) => c === 201).length} evicted, ${outcomes.filter((c) => c === 429).length} refused; max voters not Ready ${watch.maxNotReady}`);
  for (const e of evicted) console.log(`  ${e}`);
  console.log(`  ${watch.timeline.join('\n  ')}`);
  expect(outcomes.filter((c) => c === 429).length).toBeGreaterThan(0);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  expect(done.status?.members?.map((m) => m.version)).toEqual(['2.6.1', '2.6.1', '2.6.1']);
  expect(await verifyAcknowledged(report, await voterIps(s))).toEqual([]);
});

it('upgrade-drain: a kubectl drain of a voter\'s node during the upgrade finishes, one pod at a time', async () => {
  s = await scenario('updrain');
  const before = await formed(s, seedSpec());
  const leader = before.status!.leader!;
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 50 });
  const watch = await monitor(s);
  await patchSpec(s, { version: '2.6.1' });
  await waitFor('the first restart', async () => (await clusterEvents(s!)).some((e) => e.reason === 'RestartPod'), 180_000);
  const first = Number(/pod (\d)/.exec((await clusterEvents(s)).find((e) => e.reason === 'RestartPod')!.message!)![1]);
  // A node whose voter is neither restarting nor leading.
  const target = [0, 1, 2].find((o) => o !== first && o !== leader - 1)!;
  const node = (await pods(s)).find((p) => p.metadata?.name === `queen-${target}`)!.spec!.nodeName!;
  uncordon.push(node);
  const drain = await kubectl(['drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--pod-selector=app.kubernetes.io/name=queen', '--timeout=400s']);
  console.log(`upgrade-drain: drain of ${node} (pod ${target}): exit ${drain.code}\n${drain.stdout}${drain.stderr}`);
  expect(drain.code).toBe(0);
  expect(drain.stdout).toContain(`pod/queen-${target} evicted`);
  const done = await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 600_000);
  await watch.stop();
  const report = await load.stop();
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  expect(done.status?.members?.map((m) => m.version)).toEqual(['2.6.1', '2.6.1', '2.6.1']);
  expect((await pods(s)).find((p) => p.metadata?.name === `queen-${target}`)!.spec!.nodeName).not.toBe(node);
  expect(await verifyAcknowledged(report, await voterIps(s))).toEqual([]);
  console.log(`upgrade-drain:\n  ${watch.timeline.join('\n  ')}`);
});
