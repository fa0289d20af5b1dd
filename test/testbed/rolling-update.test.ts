// Check (e): the baseline a user has without the operator. `kubectl set image` rolls the plain
// StatefulSet of seed 001 through the real StatefulSet controller (highest ordinal first, each pod
// Ready plus minReadySeconds before the next) while the load client pushes 50 messages a second
// through the client Service; the test prints the failed and retried pushes and checks that
// nothing acknowledged was lost.
import { afterAll, expect, it } from 'vitest';
import { checkSeedCluster, listPods, until } from './checks.ts';
import { connect } from './client.ts';
import { startLoad, verifyAcknowledgedDetail } from './load.ts';

const client = connect();
let ns = '';

afterAll(async () => {
  if (ns) await client.deleteNamespace(ns);
});

it('a kubectl set image rolling update completes under 50 pushes a second, and nothing acknowledged is lost', async () => {
  ns = await client.newNamespace('rolling-e');
  await checkSeedCluster(client, ns);
  const before = await listPods(client, ns, 'app=queen');
  const uidsBefore = new Map(before.map((p) => [p.metadata.name, p.metadata.uid]));

  const load = startLoad({ kubeConfig: client.kubeConfig(), namespace: ns, service: 'queen', rate: 50 });
  await until('the first acknowledgements', async () => load.progress().acknowledged >= 50, 30_000);

  const began = Date.now();
  const set = await client.kubectl(['-n', ns, 'set', 'image', 'statefulset/queen', 'queen=ghcr.io/queen-mq/queen:2.6.1']);
  expect(set.code).toBe(0);
  const rollout = await client.kubectl(['-n', ns, 'rollout', 'status', 'statefulset/queen', '--timeout=480s'], { timeoutMs: 500_000 });
  const rolledInMs = Date.now() - began;
  expect(rollout.stderr).toBe('');
  expect(rollout.code).toBe(0);
  expect(rollout.stdout).toContain('statefulset rolling update complete 3 pods');
  // A few seconds of load on the new pods too.
  const settled = load.progress().acknowledged + 100;
  await until('load on the new pods', async () => load.progress().acknowledged >= settled, 30_000);
  const report = await load.stop();

  const after = await listPods(client, ns, 'app=queen');
  expect(after.map((p) => p.spec.containers[0].image)).toEqual(Array(3).fill('ghcr.io/queen-mq/queen:2.6.1'));
  for (const p of after) expect(p.metadata.uid).not.toBe(uidsBefore.get(p.metadata.name));

  const voterIps = after.map((p) => p.status.podIP as string);
  const verify = await verifyAcknowledgedDetail(report, voterIps);

  console.log(
    `check (e): rolled 3 pods in ${(rolledInMs / 1000).toFixed(1)} s; pushes: ${report.sent} sent, ${report.acknowledged} acknowledged ` +
      `(${report.acknowledgedFirstTry} on the first try, ${report.retried} after a retry), ${report.failedAttempts.length} failed attempts, ` +
      `${report.unacknowledged.length} never acknowledged; acknowledged but missing on a voter: ${verify.missing.length}`,
  );
  for (const f of report.failedAttempts) console.log(`  failed push ${f.transactionId} attempt ${f.attempt} to ${f.endpoint} at ${f.at}: ${f.reason}`);
  const retriedIds = new Set(report.failedAttempts.map((f) => f.transactionId));
  console.log(`  retried pushes: ${[...retriedIds].filter((id) => report.acknowledgedIds.includes(id)).join(' ') || 'none'}`);
  if (report.unacknowledged.length) console.log(`  never acknowledged: ${report.unacknowledged.join(' ')}`);
  for (const [ip, missing] of Object.entries(verify.perVoter)) if (missing.length) console.log(`  missing on ${ip}: ${missing.join(' ')}`);

  expect(report.acknowledged).toBeGreaterThan(0.9 * report.sent);
  expect(verify.missing).toEqual([]);
});
