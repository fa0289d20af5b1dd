// e2e `form`: seed 000's Install section. A Secret and a QueenCluster become a cluster that
// commits, as `kubectl get queencluster` shows it; `kubectl describe` lists the steps; the
// operator, installed from deploy/namespaced.yaml, runs under its ServiceAccount and role.
import { afterEach, describe, expect, it } from 'vitest';
import { clusterEvents, createCluster, kubectl, pods, scenario, seedSpec, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { activityTypes, recordHistory, settledRuns, workflowRuns } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

async function form(prefix: string, replicas: 1 | 3 | 5) {
  s = await scenario(prefix);
  await s.install();
  await createCluster(s, seedSpec({ replicas }));
  const voters = Array.from({ length: replicas }, (_, i) => i + 1);
  const qc = await waitForCluster(
    s,
    `${replicas} voters Ready`,
    (q) => q.status?.phase === 'Ready' && q.status?.commits === true && q.status?.version === '2.6.0' && JSON.stringify(q.status?.voters) === JSON.stringify(voters),
    240_000,
  );
  return { s, qc, voters };
}

describe('form', () => {
  it('seed 000: three voters, VERSION 2.6.0, VOTERS [1,2,3], COMMITS true, PHASE Ready', async () => {
    const { s, qc } = await form('form3', 3);
    expect(qc.status?.operation ?? null).toBeNull();
    expect(qc.status?.lastOperation).toMatchObject({ type: 'FormCluster', result: 'Succeeded' });
    expect(qc.status?.members?.map((m) => [m.pod, m.voter, m.live, m.ready])).toEqual([
      ['queen-0', true, true, true],
      ['queen-1', true, true, true],
      ['queen-2', true, true, true],
    ]);
    expect(qc.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', message: 'every voter is in place and the cluster commits' });

    const get = await kubectl(['-n', s.ns, 'get', 'queencluster']);
    expect(get.code).toBe(0);
    expect(get.stdout).toMatch(/^NAME\s+VERSION\s+VOTERS\s+COMMITS\s+PHASE\s+AGE$/m);
    expect(get.stdout).toMatch(/^queen\s+2\.6\.0\s+\[1,2,3\]\s+true\s+Ready\s+\S+$/m);

    // The last Event is posted right after the Ready status.
    await waitFor('the FormClusterSucceeded Event', async () => (await clusterEvents(s)).some((e) => e.reason === 'FormClusterSucceeded'), 30_000);
    const describeOut = await kubectl(['-n', s.ns, 'describe', 'queencluster', 'queen']);
    for (const step of ['FormClusterStarted', 'ApplyObjects', 'LeaderElected', 'VotersLive', 'WriteCommitted', 'FormClusterSucceeded']) {
      expect(describeOut.stdout).toContain(step);
    }
    const reasons = (await clusterEvents(s)).map((e) => e.reason);
    expect(reasons.indexOf('ApplyObjects')).toBeLessThan(reasons.indexOf('LeaderElected'));
    expect(reasons.indexOf('VotersLive')).toBeLessThan(reasons.indexOf('FormClusterSucceeded'));

    // One FormCluster run, its steps as activities in the Temporal history.
    const runs = await settledRuns(s, `queencluster/${s.ns}/queen`);
    expect(runs.map((r) => [r.type, r.status])).toEqual([['formCluster', 'COMPLETED']]);
    expect(await activityTypes(s, runs[0]!)).toEqual(['beginOperation', 'applyClusterObjects', 'awaitLeader', 'awaitVoters', 'confirmWrite', 'endOperation']);
    await recordHistory(s, runs[0]!, 'formCluster');
    const observer = (await workflowRuns(s, `queencluster-observer/${s.ns}/queen`))[0]!;
    await recordHistory(s, observer, 'clusterObserver');

    // Pods are spread over distinct simulated nodes (hard anti-affinity is really scheduled).
    const nodes = new Set((await pods(s)).map((p) => p.spec?.nodeName));
    expect(nodes.size).toBe(3);
    // Under the ServiceAccount and role of the manifest, nothing was refused.
    expect(s.operatorLog()).toMatch(/watcher running/);
    // The watcher and the worker share the pod's process: the run's first workflow task came back
    // with its start (eager start), not through the task queue.
    const started = s.operatorLog().split('\n').find((l) => l.includes('"msg":"started FormCluster"'));
    expect(started, 'the watcher logs the start of FormCluster').toBeDefined();
    expect(JSON.parse(started!.slice(started!.indexOf('{')))).toMatchObject({ type: 'FormCluster', eager: true });
    expect(s.operatorLog()).not.toMatch(/forbidden|HTTP-Code: 403\b/i);
  });

  it('one voter', async () => {
    const { s } = await form('form1', 1);
    expect((await pods(s)).map((p) => p.metadata?.name)).toEqual(['queen-0']);
    expect(s.operatorLog()).not.toMatch(/forbidden|HTTP-Code: 403\b/i);
  });

  it('five voters', async () => {
    const { s } = await form('form5', 5);
    expect((await pods(s)).length).toBe(5);
    expect(s.operatorLog()).not.toMatch(/forbidden|HTTP-Code: 403\b/i);
  });
});
