// e2e `image-digest`: an image pinned by digest. The pods run the image as given (the digest
// decides what runs), status.version shows the version the brokers report, and a new digest of
// the same version rolls the pods one at a time, the leader last, as an upgrade does.
import { afterEach, expect, it } from 'vitest';
import { clusterEvents, formed, getCluster, monitor, patchSpec, pods, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const digest = (c: string) => `sha256:${c.repeat(64)}`;

it('image-digest: a new digest of the same version rolls the pods; the status keeps the version', async () => {
  s = await scenario('digest');
  const first = `ghcr.io/queen-mq/queen:2.6.0@${digest('a')}`;
  const formedCluster = await formed(s, seedSpec({ image: first }));
  expect(formedCluster.status?.version).toBe('2.6.0');
  for (const p of await pods(s)) expect(p.spec!.containers[0]!.image).toBe(first);
  const leader = formedCluster.status!.leader!;

  const second = `ghcr.io/queen-mq/queen:2.6.0@${digest('b')}`;
  const watch = await monitor(s);
  await patchSpec(s, { image: second });
  await waitForCluster(
    s,
    'the roll to the new digest done',
    (q) => q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded' && q.status?.phase === 'Ready',
    300_000,
  );
  await watch.stop();
  const restarts = (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => e.message);
  expect(restarts).toHaveLength(3);
  expect(restarts.at(-1)).toBe(`restarting pod ${leader - 1}`);
  for (const [name, uids] of watch.uids) expect(uids, name).toHaveLength(2);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  for (const p of await pods(s)) expect(p.spec!.containers[0]!.image).toBe(second);
  const after = await getCluster(s);
  expect(after.status?.version).toBe('2.6.0');
  expect(after.status?.members?.map((m) => m.version)).toEqual(['2.6.0', '2.6.0', '2.6.0']);
});

it('image-digest: a digest without a tag; the version is what the broker reports', async () => {
  s = await scenario('digestonly');
  const image = `ghcr.io/queen-mq/queen@${digest('c')}`;
  const q = await formed(s, seedSpec({ replicas: 1, image }));
  expect((await pods(s))[0]!.spec!.containers[0]!.image).toBe(image);
  // The simulated broker of an image without a tag reports 2.6.0, the release it stands for.
  expect(q.status?.version).toBe('2.6.0');
});
