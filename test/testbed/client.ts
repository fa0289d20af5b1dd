// For test processes: reach a running test bed (the one the vitest global setup provides, or the
// one named by QUEEN_TESTBED=<dir>/testbed.json), make namespaces, apply manifests, run kubectl,
// and inject faults through the control API.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { request } from 'undici';
import { authFromKubeconfig, serviceAccountKubeconfig } from './kubeconfig.ts';
import { Kube } from './kube.ts';
import type { PodInfo } from './kubelet.ts';
import type { TestbedInfo } from './testbed.ts';

export type { TestbedInfo } from './testbed.ts';
export type { PodInfo } from './kubelet.ts';

let injected: TestbedInfo | undefined;
if (process.env.VITEST) {
  try {
    const { inject } = await import('vitest');
    injected = inject('testbed');
  } catch {
    // not in a vitest worker of the testbed project
  }
}

/** The running test bed's description. */
export function testbedInfo(): TestbedInfo {
  const file = process.env.QUEEN_TESTBED;
  if (file && existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as TestbedInfo;
  if (injected) return injected;
  throw new Error('no test bed: run the tests through vitest (its global setup starts one) or set QUEEN_TESTBED=<dir>/testbed.json of a running `npm run testbed`');
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export class ControlClient {
  #url: string | (() => string);
  constructor(url: string | (() => string)) {
    this.#url = url;
  }
  get url(): string {
    return (typeof this.#url === 'string' ? this.#url : this.#url()).replace(/\/$/, '');
  }
  async call<T = any>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const res = await request(this.url + path, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: 120_000,
      bodyTimeout: 120_000,
    });
    const json: any = await res.body.json();
    if (res.statusCode !== 200) throw new Error(`control API ${method} ${path}: ${res.statusCode} ${json?.error ?? ''}`);
    return json as T;
  }
  /** The pod as the kubelet stand-in runs it: address, process, restarts, volume folders. */
  pod(ns: string, name: string): Promise<PodInfo> {
    return this.call('GET', `/pods/${ns}/${name}`);
  }
  pods(): Promise<PodInfo[]> {
    return this.call('GET', '/pods');
  }
  /** Kills the container (default SIGKILL); with hold it is not restarted until release(). */
  kill(ns: string, name: string, opts: { signal?: string; hold?: boolean; container?: string } = {}): Promise<PodInfo> {
    return this.call('POST', `/pods/${ns}/${name}/kill`, { signal: opts.signal ?? 'SIGKILL', hold: opts.hold ?? false, container: opts.container });
  }
  release(ns: string, name: string, opts: { container?: string } = {}): Promise<PodInfo> {
    return this.call('POST', `/pods/${ns}/${name}/release`, opts);
  }
  /** SIGKILL, delete the volume folder's contents, restart on the empty folder. */
  wipe(ns: string, name: string, volume = 'data', opts: { container?: string } = {}): Promise<PodInfo> {
    return this.call('POST', `/pods/${ns}/${name}/wipe`, { volume, ...opts });
  }
  /**
   * Share (0..1) of volumes whose growth leaves FileSystemResizePending until a pod mounting the
   * claim starts; for all claims, or (better when tests run side by side) one namespace's. With
   * `nodeSilent` the node does not say (NodeResizeError) that it cannot grow such a mounted file system.
   */
  setResizePendingShare(share: number, namespace?: string, opts: { nodeSilent?: boolean } = {}): Promise<{ share: number; nodeSilent: boolean }> {
    return this.call('POST', '/storage/resize-pending', { share, namespace, ...opts });
  }
  /**
   * A node goes off the network: its kubelet stops reporting (the node turns NotReady, its pods
   * stay Terminating once deleted, their volumes stay attached), its simulators are cut off (raft
   * and HTTP), its other containers freeze. With `shutdown` the machine is off: its containers are
   * killed too, and start again when it comes back.
   */
  stopNode(name: string, opts: { shutdown?: boolean } = {}): Promise<{ node: string; up: boolean }> {
    return this.call('POST', `/nodes/${name}/stop`, opts);
  }
  startNode(name: string): Promise<{ node: string; up: boolean }> {
    return this.call('POST', `/nodes/${name}/start`);
  }
  /**
   * Kills a control-plane process (`kube-apiserver`, or `temporal`), SIGKILL unless told: it stays
   * down until startProcess() starts it again on its data (etcd's, or Temporal's state file).
   */
  killProcess(name: 'kube-apiserver' | 'temporal', signal = 'SIGKILL'): Promise<{ name: string; running: boolean; exitCode: number }> {
    return this.call('POST', `/processes/${name}/kill`, { signal });
  }
  /** Starts a killed control-plane process again; resolves once it serves. */
  startProcess(name: 'kube-apiserver' | 'temporal'): Promise<{ name: string; running: boolean; pid: number }> {
    return this.call('POST', `/processes/${name}/start`, {});
  }
  /** Cuts two pods ("<ns>/<pod>") from each other (both ways), or heals the cut. */
  partition(a: string, b: string, on = true): Promise<{ partitions: string[][] }> {
    return this.call('POST', '/network/partition', { a, b, on });
  }
  /** What a simulated Queen pod refuses (NetworkPolicies), whether it is cut off, its partitions. */
  networkRules(ns: string, name: string): Promise<{ cutOff?: boolean; partition?: string[]; refuse?: Record<string, string[]> }> {
    return this.call('GET', `/network/rules/${ns}/${name}`);
  }
  /**
   * Simulator settings for every Queen pod of a namespace started from now on (QUEEN_SIM_ENTRY_BYTES,
   * QUEEN_SIM_BANDWIDTH, QUEEN_SIM_REPLAY_RATE, QUEEN_SIM_LEADER_PROGRESS, ...); the pod's own env wins.
   */
  setSimEnv(namespace: string, env: Record<string, string>): Promise<{ namespace: string; env: Record<string, string> }> {
    return this.call('POST', '/sim/env', { namespace, env });
  }
  /** The broker fleets running Queen pods: one per test bed node that has run one in fleet mode. */
  simFleets(): Promise<{ node: string; pid: number; nodes: number; running: boolean }[]> {
    return this.call('GET', '/sim/fleets');
  }
  /** The image registry: tags (or images) it does not have, the time a node takes to pull a new image. */
  registry(opts: { missing?: string[]; pullSeconds?: number; forget?: boolean } = {}): Promise<{ missing: string[]; pullSeconds: number; present: Record<string, string[]> }> {
    return this.call('POST', '/registry', opts);
  }
  /** Volume growths in the namespace fail at the resizer (retried) until turned off. */
  setResizeFailing(namespace: string, on = true): Promise<{ namespaces: string[] }> {
    return this.call('POST', '/storage/resize-fails', { namespace, on });
  }
  /** What the cluster DNS answers for a name. */
  dns(name: string): Promise<{ rcode: string; ips: string[] }> {
    return this.call('GET', `/dns?name=${encodeURIComponent(name)}`);
  }
}

export interface TestbedClient {
  info: TestbedInfo;
  /** A KubeConfig for @kubernetes/client-node, admin. */
  kubeConfig(): KubeConfig;
  /** A small admin REST client (the one the test bed's stand-ins use). */
  kube(): Kube;
  control: ControlClient;
  /** Creates a namespace with a unique name starting with prefix; resolves once pods can be made in it. */
  newNamespace(prefix: string): Promise<string>;
  deleteNamespace(name: string): Promise<void>;
  /** kubectl apply -f - of the YAML, in the namespace. */
  applyManifest(yamlText: string, namespace: string): Promise<KubectlResult>;
  /** Runs the test bed's kubectl with the admin kubeconfig. */
  kubectl(args: string[], opts?: { input?: string; timeoutMs?: number }): Promise<KubectlResult>;
  serviceAccountKubeconfig(namespace: string, name: string): Promise<string>;
}

export function connect(info: TestbedInfo = testbedInfo()): TestbedClient {
  let kube: Kube | undefined;
  const admin = () => (kube ??= new Kube(authFromKubeconfig(info.kubeconfigPath)));
  const kubectl = (args: string[], opts: { input?: string; timeoutMs?: number } = {}) =>
    new Promise<KubectlResult>((resolve) => {
      const child = spawn(info.tools.kubectl, args, {
        env: { ...process.env, KUBECONFIG: info.kubeconfigPath },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 600_000);
      child.on('error', (e) => {
        clearTimeout(timer);
        resolve({ code: 127, stdout, stderr: stderr + e.message });
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code: code ?? 137, stdout, stderr });
      });
      child.stdin.end(opts.input ?? '');
    });
  return {
    info,
    kubeConfig() {
      const kc = new KubeConfig();
      kc.loadFromFile(info.kubeconfigPath);
      return kc;
    },
    kube: admin,
    control: new ControlClient(info.controlUrl),
    async newNamespace(prefix: string) {
      const name = `${prefix.toLowerCase().replace(/[^a-z0-9-]/g, '-').slice(0, 40)}-${randomBytes(3).toString('hex')}`;
      await admin().create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
      // Pods are refused until the ServiceAccount controller has made the namespace's "default".
      const deadline = Date.now() + 30_000;
      while (!(await admin().getOrNull(`/api/v1/namespaces/${name}/serviceaccounts/default`))) {
        if (Date.now() > deadline) throw new Error(`namespace ${name} got no default ServiceAccount within 30 s`);
        await new Promise((r) => setTimeout(r, 100));
      }
      return name;
    },
    async deleteNamespace(name: string) {
      await admin().delete(`/api/v1/namespaces/${name}`);
    },
    applyManifest: (yamlText, namespace) => kubectl(['apply', '-n', namespace, '-f', '-'], { input: yamlText }),
    kubectl,
    serviceAccountKubeconfig: (namespace, name) => serviceAccountKubeconfig(info.kubeconfigPath, info.dir, namespace, name),
  };
}

let shared: TestbedClient | undefined;
const client = () => (shared ??= connect());

export const kubeConfig = () => client().kubeConfig();
export const newNamespace = (prefix: string) => client().newNamespace(prefix);
export const deleteNamespace = (name: string) => client().deleteNamespace(name);
export const applyManifest = (yamlText: string, namespace: string) => client().applyManifest(yamlText, namespace);
export const kubectl = (args: string[], opts?: { input?: string; timeoutMs?: number }) => client().kubectl(args, opts);
/** The control API of the running test bed (fault injection). */
export const control = new ControlClient(() => testbedInfo().controlUrl);
