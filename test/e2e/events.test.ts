// e2e `events`: repeated Events of the same reason and message on a QueenCluster are one Event with
// a count, as the Kubernetes event recorder does, also when another replica writes the repeat; a
// different message is an Event of its own.
import { afterAll, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { makeKube, recordEvent } from '../../activities/kube.ts';
import { clusterEvents, createCluster, getCluster, kubectl, operatorSetup, scenario, seedSpec, type Scenario } from './harness.ts';

const KUBE = fileURLToPath(new URL('../../activities/kube.ts', import.meta.url));

let s: Scenario;
afterAll(() => s?.close());

it('events: repeats fold into one Event with a count', async () => {
  s = await scenario('events');
  await createCluster(s, seedSpec());
  const qc = await getCluster(s);
  const kube = makeKube(s.kc);
  for (let i = 0; i < 3; i++) await recordEvent(kube, qc, 'Degraded', 'pod 1 is not running', 'Warning');
  // Another process (as another replica would, with the operator's own RBAC) repeats it: it finds
  // the Event by its name and counts it.
  const script = `import('${KUBE}').then(async (k) => { await k.recordEvent(k.makeKube(k.loadKubeConfig(process.argv[1])), JSON.parse(process.argv[2]), 'Degraded', 'pod 1 is not running', 'Warning'); })`;
  const other = spawnSync(process.execPath, ['--input-type=module', '-e', script, operatorSetup().kubeconfig, JSON.stringify(qc)], { encoding: 'utf8' });
  expect(other.status, other.stderr).toBe(0);
  // This process repeats it again: what it remembers of the Event (count 3) is stale, and the
  // other's repeat is not lost (5, not 4).
  await recordEvent(kube, qc, 'Degraded', 'pod 1 is not running', 'Warning');
  await recordEvent(kube, qc, 'Degraded', 'pod 2 is not running', 'Warning');
  const events = (await clusterEvents(s)).filter((e) => e.reason === 'Degraded');
  expect(events.map((e) => [e.message, e.count])).toEqual([
    ['pod 1 is not running', 5],
    ['pod 2 is not running', 1],
  ]);
  const describe = await kubectl(['-n', s.ns, 'describe', 'queencluster', 'queen']);
  expect(describe.stdout).toMatch(/Warning\s+Degraded\s+\S+ \(x5 over \S+\)\s+queen-operator\s+pod 1 is not running/);
});

it('events: a step tried again after an attempt that recorded its Event (and then lost its worker) records it once', async () => {
  const qc = await getCluster(s);
  const kube = makeKube(s.kc);
  const step = { key: 'run-a/4', retried: false };
  await recordEvent(kube, qc, 'RestartPod', 'restarting pod 2', 'Normal', step);
  // The next attempt runs in another process (another replica, or the same one restarted): it
  // knows nothing of the first but what the API server holds.
  const script = `import('${KUBE}').then(async (k) => { await k.recordEvent(k.makeKube(k.loadKubeConfig(process.argv[1])), JSON.parse(process.argv[2]), 'RestartPod', process.argv[3], 'Normal', JSON.parse(process.argv[4])); })`;
  const retry = (message: string, key: string) =>
    spawnSync(process.execPath, ['--input-type=module', '-e', script, operatorSetup().kubeconfig, JSON.stringify(qc), message, JSON.stringify({ key, retried: true })], { encoding: 'utf8' });
  expect(retry('restarting pod 2', 'run-a/4').status).toBe(0);
  // Another step of the same run saying the same thing is a step of its own: counted.
  expect(retry('restarting pod 2', 'run-a/8').status).toBe(0);
  // And a retry of that one is not counted again, although the Event folds two steps.
  expect(retry('restarting pod 2', 'run-a/8').status).toBe(0);
  // Two attempts of one step at once (the first outlived its heartbeat timeout and Temporal
  // started another): the second recorded the step before the first got to it. Once, not counted.
  expect(retry('restarting pod 2', 'run-a/12').status).toBe(0);
  await recordEvent(kube, qc, 'RestartPod', 'restarting pod 2', 'Normal', { key: 'run-a/12', retried: false });
  const counted = async () => (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').map((e) => [e.message, e.count, e.metadata?.annotations?.['queenmq.com/step']]);
  expect(await counted()).toEqual([['restarting pod 2', 3, 'run-a/4 run-a/8 run-a/12']]);
  // The same in one process: both attempts on this replica's worker.
  await recordEvent(kube, qc, 'RestartPod', 'restarting pod 2', 'Normal', { key: 'run-a/16', retried: true });
  await recordEvent(kube, qc, 'RestartPod', 'restarting pod 2', 'Normal', { key: 'run-a/16', retried: false });
  expect(await counted()).toEqual([['restarting pod 2', 4, 'run-a/4 run-a/8 run-a/12 run-a/16']]);
});
