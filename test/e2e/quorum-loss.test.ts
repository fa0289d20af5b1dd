// e2e `quorum-loss`: two of three nodes killed and kept down. COMMITS turns false and the phase
// Degraded with a reason within two probe intervals. One node back: the cluster commits again and
// says which voter is still down; both back: Ready.
import { afterAll, expect, it } from 'vitest';
import { control } from '../testbed/client.ts';
import { formed, getCluster, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';

const PROBE_INTERVAL_MS = 10_000;
let s: Scenario;
afterAll(() => s?.close());

it('quorum-loss: COMMITS false and Degraded, then Ready again', async () => {
  s = await scenario('quorum');
  await s.install({ probeInterval: `${PROBE_INTERVAL_MS / 1000}s` });
  await formed(s, seedSpec());
  await control.kill(s.ns, 'queen-1', { hold: true });
  await control.kill(s.ns, 'queen-2', { hold: true });
  const lost = await waitForCluster(
    s,
    'COMMITS false and Degraded',
    (q) => q.status?.commits === false && q.status?.phase === 'Degraded',
    2 * PROBE_INTERVAL_MS + 10_000,
  );
  expect(lost.status?.message).toBeTruthy();
  expect(lost.status?.lastProbeError).toBeTruthy();
  expect(lost.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: 'Degraded' });

  await control.release(s.ns, 'queen-2');
  const majority = await waitForCluster(
    s,
    'commits again with one voter down',
    (q) => q.status?.commits === true && q.status?.phase === 'Degraded' && q.status?.message === 'pod 1 is not running',
    2 * PROBE_INTERVAL_MS + 60_000,
  );
  expect(majority.status?.leader).not.toBeNull();
  await control.release(s.ns, 'queen-1');
  const back = await waitForCluster(s, 'Ready again', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 120_000);
  expect(back.status?.message).toBe('');
  expect((await getCluster(s)).status?.voters).toEqual([1, 2, 3]);
});
