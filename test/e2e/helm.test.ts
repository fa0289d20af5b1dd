// e2e `helm`: the chart as the README installs it, cluster-wide, in the test bed of the cluster-wide
// scenarios (the `cluster-wide` project). helm lint; the README's helm install (the one change: the
// test bed's Temporal address) and its example cluster Ready; then the README's upgrade of that
// cluster and, in its middle, a helm upgrade of the operator to a build with a changed flag, the way
// users upgrade operators: its replicas roll one at a time while the operation runs, the operation
// goes on in the new replicas (the same run, completed), and no broker pod restarts twice (pod UIDs
// from a watch). Last, helm uninstall: the operator goes, and the QueenCluster, its definition and
// its pods stay, running, the same pods.
import { afterAll, expect, it } from 'vitest';
import { awaitNamespacesGone, bash, command, OPERATOR_CRDS, removeClusterWide, withTestbedTemporal } from './cluster-wide.ts';
import { getCluster, InstalledOperator, kubectl, monitor, scenario, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterAll(() => removeClusterWide(s));

const uidsOf = (pods: { metadata?: { uid?: string } }[]) => pods.map((p) => p.metadata!.uid!).sort();

it('helm: lint, install, the operator upgraded in the middle of a cluster upgrade, uninstall', async () => {
  await awaitNamespacesGone();
  const began = new Date();
  const lint = await bash(
    'helm lint charts/queen-operator && helm lint charts/queen-operator --set namespaced=true --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true --set temporal.tls.secretName=temporal-client --set temporal.apiKey.secretName=temporal-api-key',
  );
  expect(lint.code, lint.out).toBe(0);
  expect(lint.out.match(/1 chart\(s\) linted, 0 chart\(s\) failed/g)).toHaveLength(2);

  const installed = await bash(withTestbedTemporal(command('Install', 'helm install')));
  expect(installed.code, installed.out).toBe(0);
  expect(installed.out).toMatch(/deployment "queen-operator" successfully rolled out/);
  const status = JSON.parse((await bash('helm -n queen-system status queen-operator -o json')).out) as { info: { status: string }; version: number };
  expect([status.info.status, status.version]).toEqual(['deployed', 1]);

  s = await scenario('helm', { namespace: 'queen', secret: false });
  const op = new InstalledOperator('queen-system');
  const first = await op.ready(s.core, 2);
  const cluster = await bash(command('A cluster', 'kind: QueenCluster'));
  expect(cluster.code, cluster.out).toBe(0);
  await waitForCluster(s, 'the example cluster Ready', (q) => q.status?.phase === 'Ready' && q.status?.commits === true && q.status?.version === '2.6.0', 300_000);

  // The README's upgrade of the cluster...
  const watch = await monitor(s);
  const upgrade = command('Upgrade', '"version"');
  const version = /"version":"([^"]+)"/.exec(upgrade)![1]!;
  expect((await bash(upgrade)).code).toBe(0);
  const restarted = () => [...watch.uids.values()].some((uids) => uids.length >= 2);
  const moving = await waitForCluster(s, 'the first restart done', (q) => q.status?.operation?.type === 'RollingUpgrade' && / is next: /.test(q.status?.message ?? '') && restarted(), 300_000);
  const runId = moving.status!.operation!.runId!;

  // ...and in its middle, the operator upgraded with a changed flag: the Deployment rolls its replicas.
  const operatorUpgrade = await bash(
    `helm upgrade queen-operator charts/queen-operator -n queen-system --reuse-values --set-json 'extraArgs=["--probe-interval=30s"]' --wait --timeout 5m`,
  );
  expect(operatorUpgrade.code, operatorUpgrade.out).toBe(0);
  const rolled = await op.ready(s.core, 2);
  expect(uidsOf(rolled).filter((u) => uidsOf(first).includes(u))).toEqual([]);
  for (const p of rolled) expect(p.spec!.containers[0]!.args).toContain('--probe-interval=30s');
  // The replicas were replaced while the cluster's upgrade ran: it is still the same run.
  const during = await getCluster(s);
  console.log(`helm: the operator rolled while the upgrade said "${during.status?.message}"`);
  expect(during.status?.operation?.runId).toBe(runId);

  const done = await waitForCluster(
    s,
    `every pod on ${version}`,
    (q) => q.status?.version === version && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded',
    600_000,
  );
  await sleep(2000);
  await watch.stop();
  console.log(`helm:\n  ${watch.timeline.join('\n  ')}`);
  expect(done.status!.lastOperation!.runId).toBe(runId);
  const runs = (await settledRuns(s, 'queencluster/queen/queen')).filter((r) => r.type === 'rollingUpgrade' && r.startTime >= began);
  expect(runs.map((r) => [r.runId, r.status])).toEqual([[runId, 'COMPLETED']]);
  // Each broker pod restarted once, never a second voter down.
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`), `queen-${o}`).toHaveLength(2);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);

  // helm uninstall: the operator goes; the definition, the cluster and its pods stay, running.
  const brokers = async () => (await s!.core.listNamespacedPod({ namespace: 'queen', labelSelector: 'app.kubernetes.io/instance=queen' })).items;
  const before = uidsOf(await brokers());
  const uninstalled = await bash('helm uninstall queen-operator -n queen-system --wait');
  expect(uninstalled.code, uninstalled.out).toBe(0);
  await waitFor('the operator pods gone', async () => (await op.pods(s!.core)).length === 0, 120_000);
  await sleep(15_000);
  // The definitions stay with their objects: the QueenClusters and their backups.
  for (const crd of OPERATOR_CRDS) expect((await kubectl(['get', 'crd', crd, '-o', 'name'])).stdout.trim()).toBe(`customresourcedefinition.apiextensions.k8s.io/${crd}`);
  const left = await getCluster(s);
  expect(left.status?.phase).toBe('Ready');
  const pods = await brokers();
  expect(uidsOf(pods)).toEqual(before);
  expect(pods.map((p) => [p.metadata!.name, p.status?.phase, !!p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')])).toEqual([
    ['queen-0', 'Running', true],
    ['queen-1', 'Running', true],
    ['queen-2', 'Running', true],
  ]);
});
