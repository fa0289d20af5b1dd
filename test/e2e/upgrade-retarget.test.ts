// e2e `upgrade-retarget`: a second version change in the middle of an upgrade retargets the
// running upgrade at its next step; it ends with every pod on the last version, in one run, which
// the Web UI finds by that version (its QueenTarget search attribute follows the retarget).
import { afterAll, expect, it } from 'vitest';
import { clusterEvents, formed, patchSpec, scenario, seedSpec, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('upgrade-retarget: every pod ends on the last version', async () => {
  s = await scenario('retarget');
  await formed(s, seedSpec());
  await patchSpec(s, { version: '2.6.1' });
  const waitRestarts = (n: number) =>
    waitFor(`${n} restarts`, async () => (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').length >= n, 180_000);
  await waitRestarts(1);
  await patchSpec(s, { version: '2.6.2' });
  const done = await waitForCluster(s, 'every pod on 2.6.2', (q) => q.status?.version === '2.6.2' && q.status?.phase === 'Ready', 600_000);
  expect(done.status?.members?.map((m) => m.version)).toEqual(['2.6.2', '2.6.2', '2.6.2']);
  expect(done.status?.lastOperation).toMatchObject({ type: 'RollingUpgrade', result: 'Succeeded', message: expect.stringContaining('every pod runs 2.6.2') });
  const runs = (await settledRuns(s, `queencluster/${s.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade');
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  // The Web UI finds the retargeted run by the version it went to (QueenTarget), not the first.
  const found = async (target: string) => {
    const ids: string[] = [];
    for await (const w of s.temporal.workflow.list({ query: `QueenNamespace = '${s.ns}' AND QueenOperation = 'RollingUpgrade' AND QueenTarget = '${target}'` })) ids.push(w.runId);
    return ids;
  };
  expect(await waitFor('the run found by its last target', async () => ((await found('2.6.2')).length === 1 ? true : undefined), 30_000)).toBe(true);
  expect(await found('2.6.1')).toEqual([]);
});
