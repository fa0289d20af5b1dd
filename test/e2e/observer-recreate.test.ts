// e2e `observer-recreate` (issue 8, item 2): an observer belongs to one QueenCluster object (its
// uid). The race, with its timing held: the operator's worker is down while the QueenCluster is
// deleted and created again under the same name, so the old observer run is still running when
// the watcher sees the new object. The new object gets an observer of its own (the old run is
// ended), and once a worker is back COMMITS keeps being probed and the phase assessed for it.
// Then the observer is terminated by hand (`temporal workflow terminate`): the watcher starts it
// again. The watcher and the worker run as two processes so the worker can be stopped alone.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { GROUP, PLURAL, VERSION } from '../../crd/schema.ts';
import { createCluster, formed, getCluster, scenario, seedSpec, testbed, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { workflowRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

/** The uid of the QueenCluster the observer's running run observes (its input), or null. */
async function observedUid(sc: Scenario): Promise<string | null> {
  const id = `queencluster-observer/${sc.ns}/queen`;
  const d = await sc.temporal.workflow.getHandle(id).describe().catch(() => null);
  if (!d || d.status.name !== 'RUNNING') return null;
  const history = await sc.temporal.workflow.getHandle(id, d.runId).fetchHistory();
  const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  const ref = payload?.data ? (JSON.parse(Buffer.from(payload.data).toString('utf8')) as { uid?: string }) : null;
  return ref?.uid ?? null;
}

/** Two distinct write probes recorded in status after `since`: the observer works for this object. */
async function probesAfter(sc: Scenario, since: number) {
  const seen = new Set<string>();
  await waitFor(
    'two write probes of the observer',
    async () => {
      const t = (await getCluster(sc)).status?.lastProbeTime;
      if (t && Date.parse(t) > since) seen.add(t);
      return seen.size >= 2;
    },
    60_000,
    () => JSON.stringify([...seen]),
  );
}

it('observer-recreate: a QueenCluster deleted and created again gets an observer of its own; one terminated by hand is started again', async () => {
  s = await scenario('observer');
  s.startOperator('watcher', { extra: ['--run=watcher'] });
  let worker = s.startOperator('worker', { extra: ['--run=worker'] });
  const first = await formed(s, seedSpec());
  await waitFor('the observer of the first object', async () => (await observedUid(s!)) === first.metadata.uid, 30_000);

  // The worker goes away: the old observer run keeps running in Temporal, unanswered.
  await worker.kill('SIGKILL');
  await s.custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: s.ns, plural: PLURAL, name: 'queen' });
  const second = await createCluster(s, seedSpec());
  expect(second.metadata.uid).not.toBe(first.metadata.uid);
  // The watcher does not attach the new object to the old run: it ends that run and starts one for the new object.
  await waitFor('an observer run for the new object', async () => (await observedUid(s!)) === second.metadata.uid, 60_000, () => 'the old run still observes');

  worker = s.startOperator('worker-2', { extra: ['--run=worker'] });
  const ready = await waitForCluster(s, 'the new object Ready', (q) => q.status?.phase === 'Ready' && q.status?.commits === true && JSON.stringify(q.status?.voters) === '[1,2,3]', 240_000);
  expect(ready.metadata.uid).toBe(second.metadata.uid);
  await probesAfter(s, Date.now());
  const observers = await workflowRuns(s, `queencluster-observer/${s.ns}/queen`);
  expect(observers.filter((r) => r.status === 'RUNNING')).toHaveLength(1);
  expect(observers.some((r) => r.status === 'TERMINATED')).toBe(true);

  // Terminated by hand: started again (within a resync of the watcher), and probing again.
  const tb = testbed();
  const term = spawnSync(
    join(tb.tools.temporalBin, 'temporal'),
    ['workflow', 'terminate', '--address', tb.temporal.address, '--namespace', 'default', '--workflow-id', `queencluster-observer/${s.ns}/queen`, '--reason', 'ended by hand in a test'],
    { encoding: 'utf8' },
  );
  expect(term.status, term.stderr).toBe(0);
  const terminatedAt = Date.now();
  // The watcher alone in its process asks Temporal once a resync (30 s) whether the observer runs.
  await waitFor('the observer running again', async () => (await observedUid(s!)) === second.metadata.uid, 60_000);
  console.log(`observer-recreate: the observer terminated by hand ran again ${((Date.now() - terminatedAt) / 1000).toFixed(1)} s later`);
  await probesAfter(s, terminatedAt);
});
