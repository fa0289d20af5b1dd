// e2e `invalid`: bad input gets a clear error and loses nothing. The API server refuses each
// invalid spec at `kubectl apply` with a message that names the field (schema and CEL rules of
// the CRD); a missing Secret, or a Secret without its key, gives Blocked naming it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { QueenClusterSpec } from '../../crd/schema.ts';
import { spawn } from 'node:child_process';
import { createCluster, createSecret, kubectl, scenario, seedSpec, testbed, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario;
beforeAll(async () => {
  s = await scenario('invalid', { secret: false });
});
afterAll(() => s?.close());

const manifest = (name: string, spec: unknown) =>
  stringify({ apiVersion: 'queenmq.com/v1alpha1', kind: 'QueenCluster', metadata: { name, namespace: s.ns }, spec });

function apply(name: string, spec: unknown) {
  return new Promise<{ code: number; out: string }>((resolve) => {
    const p = spawn(testbed().tools.kubectl, [`--kubeconfig=${testbed().kubeconfigPath}`, 'apply', '-f', '-']);
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('close', (code) => resolve({ code: code ?? -1, out }));
    p.stdin.end(manifest(name, spec));
  });
}

const base = (over: Record<string, unknown> = {}) => ({ version: '2.6.0', secretName: 'queen', ...over });

describe('invalid specs are refused by the API server, naming the field', () => {
  it.each<[string, Record<string, unknown>, RegExp]>([
    ['replicas 4', base({ replicas: 4 }), /spec\.replicas: Unsupported value: 4: supported values: "1", "3", "5"/],
    ['no secretName', { version: '2.6.0' }, /spec\.secretName: Required value/],
    ['an empty version', base({ version: '' }), /spec\.version: Invalid value: "": spec\.version in body should be at least 1 chars long/],
    ['a size that is not a quantity', base({ storage: { size: 'big' } }), /spec\.storage\.size: Invalid value: "big": must be a positive quantity such as 50Gi/],
    ['port equal to raftPort', base({ port: 7400 }), /spec\.raftPort: Invalid value: port and raftPort must differ/],
  ])('%s', async (_name, spec, message) => {
    const r = await apply('bad', spec);
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(message);
  });

  describe('fields fixed at creation', () => {
    beforeAll(async () => {
      const r1 = await apply('fixed', base({ storage: { size: '10Gi' } }));
      expect(r1.out).toMatch(/created/);
      const r2 = await apply('fixed-class', base({ storage: { size: '10Gi', storageClassName: 'queen-expandable' } }));
      expect(r2.out).toMatch(/created/);
    });
    it.each<[string, string, Record<string, unknown>, RegExp]>([
      ['port', 'fixed', base({ storage: { size: '10Gi' }, port: 6633 }), /spec\.port: Invalid value: port is part of the peer addresses and cannot change/],
      ['raftPort', 'fixed', base({ storage: { size: '10Gi' }, raftPort: 7401 }), /spec\.raftPort: Invalid value: raftPort is part of the peer addresses and cannot change/],
      ['clusterDomain', 'fixed', base({ storage: { size: '10Gi' }, clusterDomain: 'example.org' }), /spec\.clusterDomain: Invalid value: clusterDomain is part of the peer addresses and cannot change/],
      ['storageClassName added', 'fixed', base({ storage: { size: '10Gi', storageClassName: 'queen-fixed' } }), /spec\.storage\.storageClassName: Invalid value: storageClassName cannot be set, changed or removed after creation/],
      ['storageClassName changed', 'fixed-class', base({ storage: { size: '10Gi', storageClassName: 'queen-fixed' } }), /storageClassName cannot be set, changed or removed after creation/],
      ['storageClassName removed', 'fixed-class', base({ storage: { size: '10Gi' } }), /storageClassName cannot be set, changed or removed after creation/],
      ['storage.size smaller', 'fixed', base({ storage: { size: '5Gi' } }), /spec\.storage\.size: Invalid value: storage\.size cannot shrink: a volume only grows/],
    ])('%s cannot change', async (_name, name, spec, message) => {
      const r = await apply(name, spec);
      expect(r.code).not.toBe(0);
      expect(r.out).toMatch(message);
    });
    it('and what may change, changes', async () => {
      const r = await apply('fixed', base({ storage: { size: '20Gi' }, version: '2.6.1' }));
      expect(r.code).toBe(0);
      expect(r.out).toMatch(/configured/);
    });
  });
});

describe('what is missing is named', () => {
  it('a missing Secret gives Blocked with its name, and the cluster forms once it exists', async () => {
    await s.install();
    await createCluster(s, seedSpec({ replicas: 1 } as Partial<QueenClusterSpec>), 'nosecret');
    const blocked = await waitForCluster(s, 'Blocked on the Secret', (q) => q.status?.phase === 'Blocked', 120_000, 'nosecret');
    expect(blocked.status?.message).toBe('the Secret queen does not exist: create it with the key QUEEN_RAFT_TOKEN (pod 0 cannot start)');
    await createSecret(s.core, s.ns);
    await waitForCluster(s, 'Ready once the Secret exists', (q) => q.status?.phase === 'Ready' && q.status?.commits === true, 180_000, 'nosecret');
    expect(s.operatorLog()).not.toMatch(/forbidden|HTTP-Code: 403\b/i);
  });

  it('a Secret without QUEEN_RAFT_TOKEN gives Blocked with the key', async () => {
    await s.core.createNamespacedSecret({ namespace: s.ns, body: { metadata: { name: 'nokey' }, stringData: { QUEEN_ENCRYPTION_KEY: 'x' } } });
    await createCluster(s, seedSpec({ replicas: 1, secretName: 'nokey' }), 'nokey');
    const blocked = await waitForCluster(s, 'Blocked on the key', (q) => q.status?.phase === 'Blocked', 120_000, 'nokey');
    expect(blocked.status?.message).toBe('the Secret nokey has no key QUEEN_RAFT_TOKEN: add it (pod 0 cannot start)');
  });

  it('kubectl shows the reason with -o wide', async () => {
    const r = await kubectl(['-n', s.ns, 'get', 'queencluster', 'nokey', '-o', 'wide']);
    expect(r.stdout).toMatch(/Blocked\s+the Secret nokey has no key QUEEN_RAFT_TOKEN/);
  });
});
