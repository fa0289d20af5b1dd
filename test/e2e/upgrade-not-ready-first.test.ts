// e2e `upgrade-not-ready-first`: a pod on the old version that is not Ready is restarted first,
// whatever its ordinal: it serves nobody, and the new version may be what repairs it.
import { afterAll, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { clusterEvents, formed, patchSpec, scenario, seedSpec, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario;
afterAll(() => s?.close());

it('upgrade-not-ready-first: the broken pod goes first', async () => {
  s = await scenario('notready');
  await formed(s, seedSpec());
  // Pod 0 stops and stays down: not Ready, on 2.6.0.
  await control.kill(s.ns, 'queen-0', { hold: true });
  await waitForCluster(s, 'pod 0 not Ready', (q) => q.status?.members?.find((m) => m.pod === 'queen-0')?.ready === false, 60_000);
  await patchSpec(s, { version: '2.6.1' });
  await waitForCluster(s, 'the first restart', (q) => (q.status?.message ?? '').startsWith('restarting pod') || q.status?.version === '2.6.1', 120_000);
  // The status says it first; the Event follows once the pod is deleted.
  const first = await waitFor('the first RestartPod Event', async () => (await clusterEvents(s)).find((e) => e.reason === 'RestartPod'), 60_000);
  expect(first.message).toBe('restarting pod 0');
  // The successor of pod 0 is a new pod with a new container, not held: the upgrade completes.
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 300_000);
  const restarts = (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => e.message);
  expect(restarts).toHaveLength(3);
  expect(restarts[0]).toBe('restarting pod 0');
});
