// e2e `install`: the README's plain-manifest install and its cluster ("Install", "A cluster"), run
// word for word in a test bed of its own (the one change a user makes: the Temporal address):
// deploy/install.yaml, the operator's two replicas Ready through /readyz, the README's Secret and
// example cluster Ready as `kubectl get` shows it. Then the README's upgrade under load, and in the
// middle of it the replica that runs the current step deleted by force: the other replica finishes
// the upgrade, no pod restarted twice, every push acknowledged on its first try, none lost.
import { afterAll, expect, it } from 'vitest';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { awaitNamespacesGone, bash, blocks, command, removeClusterWide, section, withTestbedTemporal } from './cluster-wide.ts';
import { clusterEvents, InstalledOperator, kubectl, monitor, scenario, sleep, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { currentStep, settledRuns } from './temporal.ts';

let s: Scenario | null = null;
afterAll(() => removeClusterWide(s));

it('install: the README word for word, then an upgrade under load through the forced loss of a replica', async () => {
  await awaitNamespacesGone();
  const began = new Date();
  // The one thing a user changes: where Temporal is.
  const installed = await bash(withTestbedTemporal(command('Install', 'kubectl apply -f deploy/install.yaml')));
  expect(installed.code, installed.out).toBe(0);
  expect(installed.out).toMatch(/deployment "queen-operator" successfully rolled out/);

  s = await scenario('install', { namespace: 'queen', secret: false });
  const op = new InstalledOperator('queen-system');
  const replicas = await op.ready(s.core, 2);
  expect(new Set(replicas.map((p) => p.spec?.nodeName)).size).toBe(2);

  const cluster = await bash(command('A cluster', 'kind: QueenCluster'));
  expect(cluster.code, cluster.out).toBe(0);
  const before = await waitForCluster(
    s,
    'the example cluster Ready',
    (q) => q.status?.phase === 'Ready' && q.status?.commits === true && q.status?.version === '2.6.0' && JSON.stringify(q.status?.voters) === '[1,2,3]',
    300_000,
  );
  // `kubectl get queencluster` prints what the README shows (but the age).
  const shown = blocks(section('A cluster')).find((b) => b.lang === '' && b.body.includes('get queencluster'))!.body.split('\n');
  const get = await bash(shown[0]!.replace(/^\$ /, ''));
  const cols = (line: string) => line.trim().split(/\s+/).slice(0, -1);
  expect(get.out.trim().split('\n').map(cols)).toEqual([cols(shown[1]!), cols(shown[2]!)]);

  // The README's upgrade, under load.
  const upgrade = command('Upgrade', '"version"');
  const version = /"version":"([^"]+)"/.exec(upgrade)![1]!;
  const load = startLoad({ kubeConfig: s.kc, namespace: 'queen', service: 'queen', rate: 50 });
  await sleep(3000);
  const watch = await monitor(s);
  expect((await bash(upgrade)).code).toBe(0);
  // In the middle of it: after the first pod's restart, the replica running the step goes, by force.
  await waitForCluster(s, 'the first restart done', (q) => q.status?.operation?.type === 'RollingUpgrade' && / is next: /.test(q.status?.message ?? ''), 300_000);
  const step = await waitFor('the replica running the step', () => currentStep(s!, 'queencluster/queen/queen').then((x) => x ?? undefined), 60_000);
  console.log(`install: deleting ${step.pod} by force while it runs ${step.activity}`);
  expect((await kubectl(['-n', 'queen-system', 'delete', 'pod', step.pod, '--grace-period=0', '--force'])).code).toBe(0);

  const after = await waitForCluster(
    s,
    `every pod on ${version}`,
    (q) => q.status?.version === version && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded',
    600_000,
  );
  await sleep(2000);
  await watch.stop();
  const report = await load.stop();
  const missing = await verifyAcknowledged(report, await voterIps(s));
  console.log(`install: ${report.acknowledged} acknowledged (${report.acknowledgedFirstTry} on the first try), ${report.failedAttempts.length} failed attempts, ${missing.length} lost`);
  console.log(`install:\n  ${watch.timeline.join('\n  ')}`);
  expect(report.acknowledged).toBeGreaterThan(100);
  expect(missing).toEqual([]);
  expect(report.failedAttempts).toEqual([]);
  expect(report.acknowledgedFirstTry).toBe(report.acknowledged);
  // Each pod restarted once, the leader last; never a second voter down.
  for (let o = 0; o < 3; o++) expect(watch.uids.get(`queen-${o}`)).toHaveLength(2);
  expect(watch.maxNotReady).toBeLessThanOrEqual(1);
  const restarts = (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => e.message);
  expect(restarts.sort()).toEqual(['restarting pod 0', 'restarting pod 1', 'restarting pod 2']);
  expect(after.status!.term).toBe(before.status!.term! + 1);
  const runs = (await settledRuns(s, 'queencluster/queen/queen')).filter((r) => r.type === 'rollingUpgrade' && r.startTime >= began);
  expect(runs.map((r) => r.status)).toEqual(['COMPLETED']);
  // The Deployment made another replica; both are Ready again.
  const now = await op.ready(s.core, 2);
  expect(now.map((p) => p.metadata?.name)).not.toContain(step.pod);
  expect(op.log()).not.toMatch(/forbidden|HTTP-Code: 403\b/i);
});
