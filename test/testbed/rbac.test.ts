// Check (c): RBAC is real. A ServiceAccount without rights is refused with 403; the same account
// given a Role can do what the Role allows, and nothing more.
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import { until } from './checks.ts';
import { connect } from './client.ts';

const client = connect();
let ns = '';

afterAll(async () => {
  if (ns) await client.deleteNamespace(ns);
});

it('a ServiceAccount without rights is refused with 403', async () => {
  ns = await client.newNamespace('rbac-c');
  expect((await client.kubectl(['-n', ns, 'create', 'serviceaccount', 'nobody'])).code).toBe(0);
  const kubeconfig = await client.serviceAccountKubeconfig(ns, 'nobody');

  // As kubectl shows it.
  const denied = await client.kubectl(['--kubeconfig', kubeconfig, '-n', ns, 'get', 'pods']);
  expect(denied.code).not.toBe(0);
  expect(denied.stderr).toContain(`pods is forbidden: User "system:serviceaccount:${ns}:nobody" cannot list resource "pods" in API group "" in the namespace "${ns}"`);

  // As a program (the operator) sees it: HTTP 403.
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const status = await core.listNamespacedPod({ namespace: ns }).then(
    () => 200,
    (e: any) => e.code as number,
  );
  expect(status).toBe(403);

  // The token itself is good: with a Role that allows listing pods, the same account may.
  const role = await client.kubectl(['-n', ns, 'create', 'role', 'pod-reader', '--verb=get,list', '--resource=pods']);
  expect(role.code).toBe(0);
  const binding = await client.kubectl(['-n', ns, 'create', 'rolebinding', 'nobody-reads', '--role=pod-reader', `--serviceaccount=${ns}:nobody`]);
  expect(binding.code).toBe(0);
  // (The API server's RBAC cache takes the new binding within moments.)
  const allowed = await until('the Role to apply', async () => {
    const r = await client.kubectl(['--kubeconfig', kubeconfig, '-n', ns, 'get', 'pods']);
    return r.code === 0 ? r : undefined;
  }, 10_000);
  expect(allowed.stderr).not.toContain('forbidden');
  const stillDenied = await core.listNamespacedSecret({ namespace: ns }).then(
    () => 200,
    (e: any) => e.code as number,
  );
  expect(stillDenied).toBe(403);
});
