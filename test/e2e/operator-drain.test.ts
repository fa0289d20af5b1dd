// e2e `operator-drain`: the operator replica that runs a waiting step of an upgrade is deleted the
// ordinary way (SIGTERM, then its grace period): it takes no new work, hands the wait to the other
// replica at once (not after a heartbeat timeout), and exits cleanly well inside its grace; the
// upgrade goes on and ends with every pod restarted once.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { formed, kubectl, monitor, patchSpec, scenario, seedSpec, testbed, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { currentStep, settledRuns } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

it('operator-drain: SIGTERM hands a waiting step to the other replica at once', async () => {
  s = await scenario('drain');
  const op = await s.install({}, { replicas: 2 });
  // A long minReadySeconds: the upgrade spends its time waiting at the stop gate.
  await formed(s, seedSpec({ minReadySeconds: 20 }));
  const watch = await monitor(s);
  await patchSpec(s, { version: '2.6.1' });
  await waitForCluster(s, 'the upgrade waiting at the gate', (q) => / is next: .*Ready for less than 20s/.test(q.status?.message ?? ''), 120_000);
  const id = `queencluster/${s.ns}/queen`;
  const step = await waitFor('the replica running the wait', async () => {
    const c = await currentStep(s, id);
    return c?.activity === 'awaitNextRestart' ? c : undefined;
  }, 30_000);
  const deletedAt = Date.now();
  const del = kubectl(['-n', s.ns, 'delete', 'pod', step.pod, '--wait=false']);
  expect((await del).code).toBe(0);
  // The wait goes on at the other replica within seconds.
  const other = await waitFor('the wait taken over', async () => {
    const c = await currentStep(s, id);
    return c && c.pod !== step.pod ? c : undefined;
  }, 20_000);
  const handOverMs = Date.now() - deletedAt;
  console.log(`operator-drain: ${other.activity} went from ${step.pod} to ${other.pod} in ${handOverMs} ms`);
  expect(handOverMs).toBeLessThan(20_000);

  // The stopped replica said so and exited with 0, long before its 30 s grace.
  const logFile = await waitFor('the stopped replica exited', async () => {
    const dir = join(testbed().logs, 'pods');
    const f = readdirSync(dir).find((x) => x.startsWith(`${s.ns}_${step.pod}_`));
    const text = f ? readFileSync(join(dir, f), 'utf8') : '';
    return /container operator exited with code/.test(text) ? text : undefined;
  }, 40_000);
  expect(logFile).toMatch(/"msg":"SIGTERM: taking no new work; running steps have 20s to finish"/);
  expect(logFile).toMatch(/"msg":"stopped"/);
  expect(logFile).toMatch(/container operator exited with code 0\n/);

  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 300_000);
  await watch.stop();
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`)).toHaveLength(2);
  const runs = (await settledRuns(s, id)).filter((r) => r.type === 'rollingUpgrade');
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  await op.ready(s.core, 2);
});
