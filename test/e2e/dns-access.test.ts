// e2e `dns-access`: the operator reaches each pod at its own DNS name through the headless
// Service (--broker-access=dns, the default in a cluster), here through the test bed's cluster
// DNS, which answers from the EndpointSlices as CoreDNS does. A cluster forms and upgrades.
import { afterAll, expect, it } from 'vitest';
import { clusterEvents, formed, patchSpec, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario;
afterAll(() => s?.close());

it('dns-access: forms and upgrades reaching the pods by name', async () => {
  s = await scenario('dns');
  const op = s.startOperator('operator', { brokerAccess: 'dns' });
  const qc = await formed(s, seedSpec());
  expect(qc.status?.members?.every((m) => m.live && m.ready && m.version === '2.6.0')).toBe(true);
  await patchSpec(s, { version: '2.6.1' });
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 300_000);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toHaveLength(3);
  expect(op.log()).not.toMatch(/forbidden|HTTP-Code: 403\b/i);
});
