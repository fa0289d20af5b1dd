// e2e `terminated` (issue 8, item 3): a workflow ended from outside. An upgrade waits at its stop
// gate (the pods have been Ready for less than minReadySeconds) and a person ends it with
// `temporal workflow terminate`: the operator notices that the run named in status.operation no
// longer runs, clears it, records status.lastOperation as Terminated with who ended it and why,
// counts it in queen_operations_ended_total, and the phase is assessed again (Blocked: the spec
// asks for an upgrade nobody runs, and how to resume). Nothing starts again by itself; a retry
// does. A reset of the resumed upgrade goes on in a new run, and status.operation follows it.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { annotate, clusterEvents, formed, getCluster, operatorMetricSum, patchSpec, scenario, seedSpec, sleep, testbed, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { workflowRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

function temporalCli(args: string[]) {
  const tb = testbed();
  const r = spawnSync(join(tb.tools.temporalBin, 'temporal'), [...args, '--address', tb.temporal.address, '--namespace', 'default'], { encoding: 'utf8' });
  expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

it('terminated: a run ended from outside is cleared from status, recorded as Terminated, and not started again until a retry', async () => {
  s = await scenario('terminated');
  // The upgrade waits at its gate for minutes: every pod has been Ready for less than 10 minutes.
  await formed(s, seedSpec({ minReadySeconds: 600 }));
  const id = `queencluster/${s.ns}/queen`;
  await patchSpec(s, { version: '2.6.1' });
  const held = await waitForCluster(s, 'the upgrade held at its gate', (q) => q.status?.operation?.gate === 'pod-ready-for-min-ready-seconds', 120_000);
  const runId = held.status!.operation!.runId!;

  temporalCli(['workflow', 'terminate', '--workflow-id', id, '--reason', 'stuck at 3 a.m., ended by hand']);
  const cleared = await waitForCluster(s, 'status.operation cleared', (q) => !q.status?.operation && q.status?.lastOperation?.runId === runId, 60_000);
  const last = cleared.status!.lastOperation!;
  expect(last).toMatchObject({ type: 'RollingUpgrade', result: 'Terminated', target: '2.6.1', workflowId: id });
  expect(last.message).toMatch(/^RollingUpgrade \(2\.6\.1\) was terminated from outside by \S+: stuck at 3 a\.m\., ended by hand at the step "pod \d is next: pod \d has been Ready for less than 10m0s"; to resume: kubectl -n \S+ annotate queencluster queen queenmq\.com\/retry=\$\(date \+%s\) --overwrite$/);
  // The phase is assessed again: the spec asks for an upgrade that nobody runs.
  await waitForCluster(s, 'Blocked with the message', (q) => q.status?.phase === 'Blocked' && q.status?.message === last.message, 60_000);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RollingUpgradeTerminated').map((e) => [e.type, e.message])).toEqual([['Warning', last.message]]);
  // Counted once among the replicas, with the result of its help text.
  expect(await operatorMetricSum(s, 'queen_operations_ended_total', { type: 'RollingUpgrade', result: 'Terminated' })).toBe(1);
  // No hot loop: nothing starts again for the same spec.
  await sleep(10_000);
  expect((await workflowRuns(s, id)).map((r) => [r.type, r.status])).toEqual([
    ['formCluster', 'COMPLETED'],
    ['rollingUpgrade', 'TERMINATED'],
  ]);

  // A retry starts it again; a reset of that run goes on in a new run, which status follows.
  await annotate(s, { 'queenmq.com/retry': '1' });
  const resumed = await waitForCluster(s, 'the upgrade held again', (q) => q.status?.operation?.gate === 'pod-ready-for-min-ready-seconds' && q.status.operation.runId !== runId, 120_000);
  const resumedRun = resumed.status!.operation!.runId!;
  temporalCli(['workflow', 'reset', '--workflow-id', id, '--type', 'LastWorkflowTask', '--reason', 'reset in a test']);
  const afterReset = await waitFor(
    'status.operation on the reset run',
    async () => {
      const d = await s!.temporal.workflow.getHandle(id).describe();
      const q = await getCluster(s!);
      return d.status.name === 'RUNNING' && d.runId !== resumedRun && q.status?.operation?.runId === d.runId ? q : undefined;
    },
    60_000,
  );
  expect(afterReset.status?.operation).toMatchObject({ type: 'RollingUpgrade', target: '2.6.1' });
  expect(afterReset.status?.lastOperation?.runId).toBe(runId);
  expect(afterReset.status?.phase).toBe('Upgrading');
});
