// Finds the test bed's tools in the cache, building them the first time (build-tools.sh).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const here = fileURLToPath(new URL('.', import.meta.url));

export interface Tools {
  k8sVersion: string;
  kubernetesBin: string;
  etcdBin: string;
  temporalBin: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  kubectl: string;
  etcd: string;
  temporal: string;
  /** Helm, which renders the chart (npm run generate) and installs it (e2e helm). */
  helm: string;
  /** The CSI snapshot controller (cmd/snapshot-controller of the external-snapshotter). */
  snapshotController: string;
  /** The VolumeSnapshot, VolumeSnapshotContent and VolumeSnapshotClass definitions (YAML files). */
  snapshotCrds: string[];
}

export class ToolsError extends Error {}

export function versions(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(join(here, 'versions.env'), 'utf8').split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

/** Runs build-tools.sh (a no-op when everything is cached) and returns the tool paths. */
export async function ensureTools(log: (line: string) => void = () => {}): Promise<Tools> {
  const script = join(here, 'build-tools.sh');
  const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const child = spawn('bash', [script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => {
      stderr += d;
      for (const line of String(d).split('\n')) if (line.startsWith('build-tools: building')) log(line);
    });
    child.on('error', (e) => resolve({ code: 127, stdout, stderr: `${stderr}\nbuild-tools: cannot run bash: ${e.message}` }));
    // 'close', not 'exit': the process may end before the last of its output has been read (under
    // load, the tool paths it prints last were missed once, and the script said nothing).
    child.on('close', (c) => resolve({ code: c ?? 1, stdout, stderr }));
  });
  if (code !== 0) {
    const lines = stderr.trim().split('\n');
    const clear = [...lines].reverse().find((l) => l.startsWith('build-tools:')) ?? lines.at(-1) ?? 'build-tools.sh failed';
    throw new ToolsError(clear);
  }
  const paths: Record<string, string> = {};
  for (const line of stdout.split('\n')) {
    const m = /^([A-Z_]+)=(.+)$/.exec(line.trim());
    if (m) paths[m[1]!] = m[2]!;
  }
  const k8s = paths.KUBERNETES_BIN;
  const etcd = paths.ETCD_BIN;
  const temporal = paths.TEMPORAL_BIN;
  const helm = paths.HELM_BIN;
  const snapshotter = paths.SNAPSHOTTER_BIN;
  if (!k8s || !etcd || !temporal || !helm || !snapshotter) {
    throw new ToolsError('build-tools: the script did not print KUBERNETES_BIN, ETCD_BIN, TEMPORAL_BIN, HELM_BIN and SNAPSHOTTER_BIN');
  }
  return {
    k8sVersion: versions().K8S_VERSION ?? 'v0.0.0',
    kubernetesBin: k8s,
    etcdBin: etcd,
    temporalBin: temporal,
    kubeApiserver: join(k8s, 'kube-apiserver'),
    kubeControllerManager: join(k8s, 'kube-controller-manager'),
    kubeScheduler: join(k8s, 'kube-scheduler'),
    kubectl: join(k8s, 'kubectl'),
    etcd: join(etcd, 'etcd'),
    temporal: join(temporal, 'temporal'),
    helm: join(helm, 'helm'),
    snapshotController: join(snapshotter, 'snapshot-controller'),
    snapshotCrds: ['volumesnapshotclasses', 'volumesnapshotcontents', 'volumesnapshots'].map((k) => join(snapshotter, 'crd', `snapshot.storage.k8s.io_${k}.yaml`)),
  };
}
