// e2e `upgrade-write-gate`: the last gate before a stop is a write that commits through a pod
// that stays. Here every pod's disk is past the broker's 85 % gate, so writes through them answer
// 507 storage_full while every voter is Ready, live and caught up: the upgrade holds with the
// reason, restarts nothing, and goes on once the disks have room again.
import { afterAll, expect, it } from 'vitest';
import { clusterEvents, formed, patchSpec, pods, scenario, seedSpec, sleep, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario;
afterAll(() => s?.close());

async function fill(ip: string, share: number | null): Promise<void> {
  const call = async (bytes: number) =>
    (await (await fetch(`http://${ip}:6632/_sim/fill`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ bytes }) })).json()) as {
      usedBytes: number;
      volumeBytes: number;
    };
  const empty = await call(0);
  if (share !== null) await call(Math.ceil(share * empty.volumeBytes) - empty.usedBytes);
}

it('upgrade-write-gate: no stop while a write does not commit', async () => {
  s = await scenario('writegate');
  await formed(s, seedSpec({ storage: { size: '16Mi' } }));
  const ips = (await pods(s)).map((p) => p.status!.podIP!);
  for (const ip of ips) await fill(ip, 0.9);
  await patchSpec(s, { version: '2.6.1' });
  const held = await waitForCluster(s, 'held on the write probe', (q) => q.status?.operation?.gate === 'write-commits', 120_000);
  expect(held.status?.phase).toBe('Upgrading');
  expect(held.status?.message).toMatch(/^pod \d is next, but a write does not commit: the write probe through pod \d answered 507: .*storage_full/);
  await sleep(5000);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toEqual([]);

  for (const ip of ips) await fill(ip, null);
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 300_000);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toHaveLength(3);
});
