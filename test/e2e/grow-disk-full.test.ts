// e2e `grow-disk-full` (issue 8, item 11): full disks and a grow that needs restarts. Every voter
// is above its disk gate (86 % used: every write a pod's clients send answers 507 storage_full,
// the operator's write probe included), and the storage class finishes growing a volume only when
// its pod restarts. The restart that frees the space passes the stop gate: a 507 from the disk
// gate is not a lost quorum, and the rest of the gate holds as always (one pod at a time). The
// grow ends with every volume grown, and writes commit again.
import { afterEach, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { clusterEvents, formed, monitor, patchSpec, pods, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

async function sim(ip: string, method: 'GET' | 'POST', path: string, body?: unknown) {
  const r = await fetch(`http://${ip}:6632${path}`, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  return (await r.json()) as { usedBytes: number; volumeBytes: number; gateClosed: boolean; fillerBytes?: number };
}

it('grow-disk-full: every disk above the gate, volumes that grow on restart: the grow restarts one pod at a time and the writes commit again', async () => {
  s = await scenario('growfull');
  await control.call('POST', '/storage/resize-pending', { share: 1, namespace: s.ns });
  await formed(s, seedSpec({ storage: { size: '64Mi' } }));
  for (const p of await pods(s)) {
    const ip = p.status!.podIP!;
    const info = await sim(ip, 'GET', '/_sim/info');
    const filled = await sim(ip, 'POST', '/_sim/fill', { bytes: Math.ceil(0.86 * info.volumeBytes) - info.usedBytes });
    expect(filled.gateClosed, p.metadata?.name).toBe(true);
  }
  await waitForCluster(s, 'no write commits', (q) => q.status?.commits === false && /answered 507/.test(q.status?.lastProbeError ?? ''), 60_000);

  const watch = await monitor(s);
  await patchSpec(s, { storage: { size: '128Mi' } });
  const done = await waitForCluster(s, 'the grow done, writes committing', (q) => q.status?.lastOperation?.type === 'GrowVolumes' && q.status?.phase === 'Ready' && q.status?.commits === true, 300_000);
  await watch.stop();
  expect(done.status?.lastOperation).toMatchObject({ result: 'Succeeded', message: 'every volume is 128Mi' });
  for (const c of (await s.core.listNamespacedPersistentVolumeClaim({ namespace: s.ns })).items) expect(c.status?.capacity?.storage, c.metadata?.name).toBe('128Mi');
  const restarts = (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => e.message).sort();
  expect(restarts).toEqual([0, 1, 2].map((o) => `restarting pod ${o} to finish growing its volume`));
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  for (const p of await pods(s)) expect((await sim(p.status!.podIP!, 'GET', '/_sim/info')).gateClosed, p.metadata?.name).toBe(false);
});
