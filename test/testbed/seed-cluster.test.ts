// Check (a): the plain manifest of seed 001 (namespace, Secret, Services, PDB, StatefulSet),
// applied as it is, forms a three-voter cluster on the test bed.
import { afterAll, expect, it } from 'vitest';
import { checkSeedCluster } from './checks.ts';
import { connect } from './client.ts';

const client = connect();
let ns = '';

afterAll(async () => {
  if (ns) await client.deleteNamespace(ns);
});

it('the seed 001 manifest forms a three-voter cluster: voters [1,2,3] all live, lag 0, through every pod; every pod Ready; a write commits', async () => {
  const began = Date.now();
  ns = await client.newNamespace('seed-a');
  const r = await checkSeedCluster(client, ns);

  expect(r.pods.map((p) => p.name)).toEqual(['queen-0', 'queen-1', 'queen-2']);
  for (const view of r.views) {
    expect(view.voters).toEqual([1, 2, 3]);
    expect(view.members.map((m) => ({ nodeId: m.nodeId, live: m.live, lag: m.lag }))).toEqual([
      { nodeId: 1, live: true, lag: 0 },
      { nodeId: 2, live: true, lag: 0 },
      { nodeId: 3, live: true, lag: 0 },
    ]);
    expect(view.leader).toBe(r.leader);
  }
  expect(r.leader).toBeOneOf([1, 2, 3]);

  // Every pod Ready, as `kubectl get pods` shows it, each on its own node (hard anti-affinity),
  // over all three zones (the zone spread), each with its own loopback address.
  const pods = await client.kube().get<any>(`/api/v1/namespaces/${ns}/pods`, { query: { labelSelector: 'app=queen' } });
  for (const p of pods.items) {
    expect(p.status.phase).toBe('Running');
    expect(p.status.conditions.find((c: any) => c.type === 'Ready')?.status).toBe('True');
    // An address of this test bed's range (127.N.0.0/16), never 127.0.0.1.
    expect(p.status.podIP.startsWith(client.info.podAddresses.replace(/0\.0\/16$/, ''))).toBe(true);
  }
  const nodes = await client.kube().get<any>('/api/v1/nodes');
  const zoneOf = new Map<string, string>(nodes.items.map((n: any) => [n.metadata.name, n.metadata.labels['topology.kubernetes.io/zone']]));
  expect(new Set(r.pods.map((p) => p.node)).size).toBe(3);
  expect(new Set(r.pods.map((p) => zoneOf.get(p.node))).size).toBe(3);
  expect(new Set(r.pods.map((p) => p.ip)).size).toBe(3);
  console.log(`check (a): ${ns}: voters [${r.voters.join(',')}], leader ${r.leader}, pods ${r.pods.map((p) => `${p.name}@${p.node}/${p.ip}`).join(' ')} in ${((Date.now() - began) / 1000).toFixed(1)} s`);
});
