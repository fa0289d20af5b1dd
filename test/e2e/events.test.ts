// e2e `events`: repeated Events of the same reason and message on a QueenCluster are one Event with
// a count, as the Kubernetes event recorder does, also when another replica writes the repeat; a
// different message is an Event of its own.
import { afterAll, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { makeKube, recordEvent } from '../../activities/kube.ts';
import { clusterEvents, createCluster, getCluster, kubectl, scenario, seedSpec, testbed, type Scenario } from './harness.ts';

const KUBE = fileURLToPath(new URL('../../activities/kube.ts', import.meta.url));

let s: Scenario;
afterAll(() => s?.close());

it('events: repeats fold into one Event with a count', async () => {
  s = await scenario('events');
  await createCluster(s, seedSpec());
  const qc = await getCluster(s);
  const kube = makeKube(s.kc);
  for (let i = 0; i < 3; i++) await recordEvent(kube, qc, 'Degraded', 'pod 1 is not running', 'Warning');
  // Another process (as another replica would) repeats it: it finds the Event and counts it.
  const script = `import('${KUBE}').then(async (k) => { await k.recordEvent(k.makeKube(k.loadKubeConfig(process.argv[1])), JSON.parse(process.argv[2]), 'Degraded', 'pod 1 is not running', 'Warning'); })`;
  const other = spawnSync(process.execPath, ['--input-type=module', '-e', script, testbed().kubeconfigPath, JSON.stringify(qc)], { encoding: 'utf8' });
  expect(other.status, other.stderr).toBe(0);
  await recordEvent(kube, qc, 'Degraded', 'pod 2 is not running', 'Warning');
  const events = (await clusterEvents(s)).filter((e) => e.reason === 'Degraded');
  expect(events.map((e) => [e.message, e.count])).toEqual([
    ['pod 1 is not running', 4],
    ['pod 2 is not running', 1],
  ]);
  const describe = await kubectl(['-n', s.ns, 'describe', 'queencluster', 'queen']);
  expect(describe.stdout).toMatch(/Warning\s+Degraded\s+\S+ \(x4 over \S+\)\s+queen-operator\s+pod 1 is not running/);
});
