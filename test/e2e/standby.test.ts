// e2e `standby`: a standby cluster formed beside its source, under load through the source's
// client Service. Node 1 of the standby starts from the source's snapshot, the two others join it;
// it follows with its lag in status, PHASE Standby (ROLE standby in -o wide), refuses writes with
// 503 `standby`, and holds every message the source acknowledged. An upgrade of the source waits
// (Blocked) until the standby runs the new version; the standby upgrades as any cluster does. A standby whose link token is
// wrong is Degraded with the source's address, the broker's words and the Secret's name. Invalid
// standby specs are refused by the API server with what to change.
import { afterEach, expect, it } from 'vitest';
import { request } from 'undici';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { clusterEvents, createCluster, kubectl, patchSpec, pods, scenario, seedSpec, voterIps, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { formSource, LINK_SECRET, standbyFollowing, standbySpec } from './link-scenario.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

it('standby: formed from its source\'s snapshot under load, it follows with its lag shown, refuses writes and holds every acknowledged message', async () => {
  s = await scenario('standby');
  await s.install({ probeInterval: '5s' });
  await formSource(s);
  const load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 100, queue: 'orders' });
  await waitFor('the load under way', async () => load.progress().acknowledged > 200, 60_000);
  await createCluster(s, standbySpec(), 'dr');
  const dr = await standbyFollowing(s);
  expect(dr.status?.role).toBe('standby');
  expect(dr.status?.standby).toMatchObject({ source: `${s.ns}/queen`, state: 'following' });
  expect(dr.status?.standby?.error ?? null).toBeNull();
  expect(dr.status?.standby?.position).toBeGreaterThan(200);
  expect(typeof dr.status?.standby?.lagEntries).toBe('number');
  expect(typeof dr.status?.standby?.lagSeconds).toBe('number');
  expect(Date.parse(dr.status!.standby!.lastAppliedAt!)).toBeGreaterThan(Date.now() - 60_000);
  expect(dr.status?.commits).toBe(true);
  expect(dr.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', reason: 'Standby' });

  // kubectl: PHASE Standby, and ROLE in -o wide (the source says it has a standby at its next look).
  await waitForCluster(s, 'the source knowing its standby', (q) => q.status?.role === 'source', 30_000);
  const get = await kubectl(['-n', s.ns, 'get', 'queencluster', 'dr']);
  expect(get.stdout).toMatch(/^dr\s+2\.6\.0\s+\[1,2,3\]\s+true\s+Standby\s+\S+$/m);
  const wide = await kubectl(['-n', s.ns, 'get', 'queencluster', '-o', 'wide']);
  expect(wide.stdout).toMatch(/^NAME\s+VERSION\s+VOTERS\s+COMMITS\s+PHASE\s+ROLE\s+MESSAGE\s+AGE$/m);
  expect(wide.stdout).toMatch(/^dr\s+2\.6\.0\s+\[1,2,3\]\s+true\s+Standby\s+standby\s+/m);
  expect(wide.stdout).toMatch(/^queen\s+2\.6\.0\s+\[1,2,3\]\s+true\s+Ready\s+source\s+/m);

  // Formed on a seed: node 1 alone first, then the two others joined it.
  const events = (await clusterEvents(s, 'dr')).map((e) => `${e.reason}: ${e.message}`);
  expect(events.find((e) => e.startsWith('LeaderElected'))).toMatch(/^LeaderElected: node 1 leads \(term \d+\)$/);
  expect(events).toEqual(expect.arrayContaining([
    'AddLearner: adding node 2 as a learner',
    'AddLearner: adding node 3 as a learner',
    'Promote: promoting nodes 2 and 3 to voters',
  ]));
  // Never Degraded on its way: no write probe is sent to a standby whose link role is not read yet.
  expect(events.filter((e) => /^(Degraded|Blocked):/.test(e)), events.join('\n')).toEqual([]);

  // Every pod of the standby refuses a write, retryably, and says why.
  for (const p of await pods(s, 'dr')) {
    const r = await request(`http://${p.status!.podIP}:6632/api/v1/push`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ items: [{ queue: 'orders', payload: { x: 1 } }] }),
    });
    expect(r.statusCode).toBe(503);
    expect(r.headers['retry-after']).toBe('1');
    expect(((await r.body.json()) as { code: string }).code).toBe('standby');
  }

  // An upgrade of the source waits for its standby's: the standby first (it upgrades as any
  // cluster does, following all along), then the source.
  await patchSpec(s, { version: '2.6.1' });
  const held = await waitForCluster(s, 'the source upgrade held', (q) => q.status?.phase === 'Blocked', 120_000);
  expect(held.status?.message).toBe(
    `the standby ${s.ns}/dr runs 2.6.0: upgrade it to 2.6.1 first; a source on a newer version can write entries its standby does not read yet, and its replay would stop`,
  );
  await patchSpec(s, { version: '2.6.1' }, 'dr');
  const upgraded = await waitForCluster(
    s,
    'the standby upgraded',
    (q) => q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded' && q.status?.phase === 'Standby' && q.status?.version === '2.6.1',
    600_000,
    'dr',
  );
  expect(upgraded.status?.standby?.state).toBe('following');
  await waitForCluster(
    s,
    'the source upgraded after it',
    (q) => q.status?.lastOperation?.type === 'RollingUpgrade' && q.status.lastOperation.result === 'Succeeded' && q.status?.phase === 'Ready' && q.status?.version === '2.6.1',
    600_000,
  );

  const report = await load.stop();
  expect(report.unacknowledged).toEqual([]);
  console.log(`standby: ${report.acknowledged} messages acknowledged by the source; standby lag ${dr.status?.standby?.lagEntries} entries, ${dr.status?.standby?.lagSeconds} s`);
  // Every message the source acknowledged reaches every voter of the standby.
  expect(await verifyAcknowledged(report, await voterIps(s, 'dr'), { timeoutMs: 60_000 })).toEqual([]);
});

it('standby: a wrong link token is said in status with the Secret\'s name; invalid specs are refused with what to change', async () => {
  s = await scenario('sbtoken');
  await s.install({ probeInterval: '5s' });
  await formSource(s);
  await s.core.createNamespacedSecret({ namespace: s.ns, body: { metadata: { name: 'wrong' }, stringData: { token: 'w'.repeat(48) } } });
  await createCluster(s, seedSpec({ replicas: 1, standby: { source: { cluster: { name: 'queen' } }, tokenSecret: { name: 'wrong', key: 'token' }, seed: false } }), 'bad');
  const bad = await waitForCluster(s, 'the refused token said', (q) => /QUEEN_LINK_SOURCE_TOKEN/.test(q.status?.message ?? ''), 180_000, 'bad');
  expect(bad.status?.message).toMatch(
    new RegExp(`^waiting for a write to commit: the standby.s source ${s.ns}/queen does not answer it: http://queen-\\d\\.queen-headless\\.${s.ns}\\.svc\\.cluster\\.local:7400/link/v1/read: the source refused this standby's QUEEN_LINK_SOURCE_TOKEN; the link token is key token of Secret wrong: it must hold the source's QUEEN_LINK_TOKEN \\(its spec\\.link\\.tokenSecret\\)$`),
  );
  // A seeded standby with a wrong token: its first node cannot take the seed and crash-loops; the
  // status says what may be wrong, and where the token is.
  await s.core.createNamespacedSecret({ namespace: s.ns, body: { metadata: { name: 'wrong2' }, stringData: { token: 'x'.repeat(48) } } });
  await createCluster(s, seedSpec({ replicas: 1, standby: { source: { cluster: { name: 'queen' } }, tokenSecret: { name: 'wrong2', key: 'token' } } }), 'badseed');
  const badSeed = await waitForCluster(s, 'the seed refused said', (q) => /crash-looping/.test(q.status?.message ?? ''), 180_000, 'badseed');
  expect(badSeed.status?.message).toMatch(
    new RegExp(`^waiting for the pods to start and elect a leader: pod 0 takes its first state from the source's snapshot and is crash-looping \\(exit code 1\\): the source ${s.ns}/queen refuses it or does not answer; the link token is key token of Secret wrong2$`),
  );
  // Put right, it follows.
  await s.core.replaceNamespacedSecret({ namespace: s.ns, name: 'wrong', body: { metadata: { name: 'wrong' }, stringData: { token: 'l'.repeat(48) } } });
  await kubectl(['-n', s.ns, 'delete', 'pod', 'bad-0']);
  await waitForCluster(s, 'the standby following once the token is right', (q) => q.status?.phase === 'Standby', 180_000, 'bad');

  // Refused at admission, with what to change.
  for (const [source, message] of [
    [{ cluster: { name: 'queen' }, addresses: ['queen-0:7400'] }, 'name the source either by cluster (a QueenCluster in this Kubernetes cluster) or by addresses'],
    [{}, 'name the source either by cluster'],
    [{ addresses: ['https://queen-0:7400'] }, 'spec.standby.source.addresses[0]'],
  ] as const) {
    const err = await createCluster(s, seedSpec({ standby: { source, tokenSecret: LINK_SECRET } as never }), 'invalid').then(() => null, (e: unknown) => String((e as { body?: unknown }).body ?? e));
    expect(err).toContain(message);
  }
});
