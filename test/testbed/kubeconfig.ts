// Kubeconfig files: the admin one the test bed writes, and one per ServiceAccount so a process (the
// operator) can run under that account's RBAC.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse, stringify } from 'yaml';
import { Kube, type KubeAuth } from './kube.ts';

export function kubeconfigYaml(o: { server: string; caPem: string; token: string; user: string; namespace?: string }): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'queen-testbed', cluster: { server: o.server, 'certificate-authority-data': Buffer.from(o.caPem).toString('base64') } }],
    users: [{ name: o.user, user: { token: o.token } }],
    contexts: [{ name: 'queen-testbed', context: { cluster: 'queen-testbed', user: o.user, namespace: o.namespace ?? 'default' } }],
    'current-context': 'queen-testbed',
  });
}

export function writeKubeconfig(path: string, o: Parameters<typeof kubeconfigYaml>[0]): string {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, kubeconfigYaml(o), { mode: 0o600 });
  return path;
}

/** Reads server, CA and token back from a kubeconfig this test bed wrote. */
export function authFromKubeconfig(path: string): KubeAuth {
  const kc = parse(readFileSync(path, 'utf8'));
  const ctx = kc.contexts.find((c: any) => c.name === kc['current-context']).context;
  const cluster = kc.clusters.find((c: any) => c.name === ctx.cluster).cluster;
  const user = kc.users.find((u: any) => u.name === ctx.user).user;
  return { server: cluster.server, ca: Buffer.from(cluster['certificate-authority-data'], 'base64').toString(), token: user.token };
}

/**
 * A kubeconfig for a ServiceAccount (which must exist): a token from the TokenRequest API, valid
 * for `expirationSeconds` (default 24 h). Returns the file's path under `<dir>/kubeconfigs/`.
 */
export async function serviceAccountKubeconfig(
  adminKubeconfigPath: string,
  dir: string,
  namespace: string,
  name: string,
  opts: { expirationSeconds?: number } = {},
): Promise<string> {
  const auth = authFromKubeconfig(adminKubeconfigPath);
  const kube = new Kube(auth);
  try {
    const tr = await kube.create<any>(`/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: opts.expirationSeconds ?? 86_400 },
    });
    return writeKubeconfig(join(dir, 'kubeconfigs', `sa-${namespace}-${name}.yaml`), {
      server: auth.server,
      caPem: auth.ca,
      token: tr.status.token,
      user: `system:serviceaccount:${namespace}:${name}`,
      namespace,
    });
  } finally {
    await kube.close();
  }
}
