// e2e `upgrade-image` (issue 12, item 3): a version whose image the registry does not have. The
// first pod restarted on it cannot pull its image (ErrImagePull, then ImagePullBackOff); the
// upgrade holds after that one pod, with a status that names the image and the cause, and never
// stops a second voter. A version that exists, given instead, retargets the upgrade: the broken
// pod goes first, and every pod ends on that version with nothing lost.
import { afterEach, expect, it } from 'vitest';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { clusterEvents, formed, monitor, patchSpec, pods, scenario, seedSpec, sleep, voterIps, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('upgrade-image: a version that cannot be pulled holds the upgrade after one pod, and says why', async () => {
  s = await scenario('upimage');
  await formed(s, seedSpec());
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 50 });
  const watch = await monitor(s);
  await patchSpec(s, { version: '2.6.9-missing' });
  const image = 'ghcr.io/queen-mq/queen:2.6.9-missing';
  const held = await waitForCluster(
    s,
    'the upgrade held on the image',
    (q) => /is next: pod \d cannot pull its image /.test(q.status?.message ?? ''),
    180_000,
  );
  const broken = Number(/pod (\d) cannot pull/.exec(held.status!.message!)![1]);
  expect(held.status?.message).toMatch(new RegExp(`^pod \\d is next: pod ${broken} cannot pull its image ${image.replace(/[.]/g, '\\.')} \\((ErrImagePull|ImagePullBackOff): not found\\)$`));
  expect(held.status?.phase).toBe('Upgrading');
  expect(held.status?.operation?.gate).toBe('image-pull');
  // It stays held: one pod restarted, the other two untouched and serving.
  await sleep(15_000);
  const restarts = (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => e.message);
  expect(restarts).toEqual([`restarting pod ${broken}`]);
  const list = await pods(s);
  expect(list.find((p) => p.metadata?.name === `queen-${broken}`)?.status?.containerStatuses?.[0]?.state?.waiting?.reason).toMatch(/ErrImagePull|ImagePullBackOff/);
  expect(list.filter((p) => p.metadata?.name !== `queen-${broken}`).every((p) => p.spec?.containers[0]?.image === 'ghcr.io/queen-mq/queen:2.6.0')).toBe(true);

  // A version that exists: the broken pod goes first, then the rest.
  await patchSpec(s, { version: '2.6.1' });
  const done = await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 600_000);
  await watch.stop();
  const report = await load.stop();
  // The broken pod was restarted again first (the repeated Event folds into one with a count of 2).
  expect(done.status?.lastOperation?.message).toMatch(new RegExp(`restarted pods ${broken}, ${broken}, \\d and \\d, the leader last$`));
  const again = (await clusterEvents(s)).find((e) => e.reason === 'RestartPod' && e.message === `restarting pod ${broken}`);
  expect(again?.count).toBe(2);
  expect(done.status?.members?.map((m) => m.version)).toEqual(['2.6.1', '2.6.1', '2.6.1']);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  expect(await verifyAcknowledged(report, await voterIps(s))).toEqual([]);
  console.log(`upgrade-image:\n  ${watch.timeline.join('\n  ')}`);
});
