// Global setup for the operator's tests in the test bed (after test/testbed/global-setup.ts):
// the CRD and the operator's ServiceAccount and ClusterRole from deploy/install.yaml, a kubeconfig
// for that ServiceAccount (so the operator runs under its own RBAC), and the workflow code
// bundled once for every operator process the tests start.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { applyObject, makeKube } from '../../activities/kube.ts';
import type { TestProject } from 'vitest/node';
import { parseAllDocuments } from 'yaml';
import { bundleWorkflows } from '../../worker.ts';

export interface OperatorSetup {
  /** Kubeconfig of ServiceAccount queen-system/queen-operator, bound to the ClusterRole of install.yaml. */
  kubeconfig: string;
  /** The workflow code, bundled once. */
  workflowBundle: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    operator: OperatorSetup;
  }
}

const INSTALL = fileURLToPath(new URL('../../deploy/install.yaml', import.meta.url));

export default async function setup(project: TestProject) {
  const tb = project.getProvidedContext().testbed;
  const kc = new KubeConfig();
  kc.loadFromFile(tb.kubeconfigPath);
  const kube = makeKube(kc);
  // Everything but the Deployment: the tests run the operator as a process on this machine.
  const docs = parseAllDocuments(readFileSync(INSTALL, 'utf8'))
    .map((d) => d.toJSON() as KubernetesObject | null)
    .filter((d): d is KubernetesObject => !!d && d.kind !== 'Deployment');
  for (const doc of docs) await applyObject(kube, doc);
  const dir = join(tb.dir, 'operator');
  mkdirSync(dir, { recursive: true });
  const workflowBundle = join(dir, 'workflow-bundle.js');
  writeFileSync(workflowBundle, await bundleWorkflows());
  const kubeconfig = join(dir, 'queen-operator.kubeconfig');
  writeFileSync(kubeconfig, await serviceAccountKubeconfig(kc, 'queen-system', 'queen-operator'), { mode: 0o600 });
  project.provide('operator', { kubeconfig, workflowBundle });
}

/** A kubeconfig that authenticates as a ServiceAccount with a token from the TokenRequest API. */
async function serviceAccountKubeconfig(admin: KubeConfig, namespace: string, name: string): Promise<string> {
  const core = admin.makeApiClient(CoreV1Api);
  const tr = await core.createNamespacedServiceAccountToken({
    namespace,
    name,
    body: { spec: { audiences: [], expirationSeconds: 24 * 3600 } },
  });
  const cluster = admin.getCurrentCluster()!;
  const sa = new KubeConfig();
  sa.loadFromOptions({
    clusters: [cluster],
    users: [{ name: `${namespace}-${name}`, token: tr.status!.token }],
    contexts: [{ name: 'operator', cluster: cluster.name, user: `${namespace}-${name}` }],
    currentContext: 'operator',
  });
  return sa.exportConfig();
}
