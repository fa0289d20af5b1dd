// The simulated nodes: Node objects with the labels the scheduler spreads on, kept Ready the way a
// kubelet keeps them (a Lease renewed every 10 s, the status posted every minute, and at once when
// the API server holds another view of it), so the real node-lifecycle controller never marks them
// unreachable, and a node it marked so while the API server was away is Ready again as soon as its
// kubelet reaches it. A node can be stopped from the control API: it then stops renewing, and the
// real controller marks it NotReady and taints it.
import { isConflict, type Kube } from './kube.ts';

export interface NodeSpec {
  name: string;
  zone: string;
  ip: string;
}

export const NODES: NodeSpec[] = [
  { name: 'tb-node-1', zone: 'tb-zone-a', ip: '127.0.1.1' },
  { name: 'tb-node-2', zone: 'tb-zone-b', ip: '127.0.1.2' },
  { name: 'tb-node-3', zone: 'tb-zone-c', ip: '127.0.1.3' },
  { name: 'tb-node-4', zone: 'tb-zone-a', ip: '127.0.1.4' },
  { name: 'tb-node-5', zone: 'tb-zone-b', ip: '127.0.1.5' },
];

/**
 * What each node offers. Pods: the kubelet's default 110, or QUEEN_TESTBED_MAX_PODS (a kubelet's
 * --max-pods) for a test bed that holds hundreds of clusters (the scale benchmark: 600 pods).
 */
const RESOURCES = { cpu: '16', memory: '64Gi', pods: maxPods(), 'ephemeral-storage': '200Gi' };

function maxPods(): string {
  const n = Number(process.env.QUEEN_TESTBED_MAX_PODS ?? 110);
  if (!Number.isInteger(n) || n < 1) throw new Error(`QUEEN_TESTBED_MAX_PODS: "${process.env.QUEEN_TESTBED_MAX_PODS}" is not a number of pods`);
  return String(n);
}
const LEASE_SECONDS = 40;
const RENEW_MS = 10_000;
const STATUS_MS = 60_000;

const time = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const microTime = () => new Date().toISOString().replace(/Z$/, '000Z');

export class Nodes {
  #kube: Kube;
  #k8sVersion: string;
  #timers: NodeJS.Timeout[] = [];
  #stopped = new Set<string>();
  /** When each node's status was last posted (ms). */
  #posted = new Map<string, number>();
  #log: (line: string) => void;

  #kubeletPort: number;

  constructor(kube: Kube, k8sVersion: string, log: (line: string) => void, kubeletPort = 10250) {
    this.#kube = kube;
    this.#k8sVersion = k8sVersion;
    this.#log = log;
    this.#kubeletPort = kubeletPort;
  }

  get ips(): string[] {
    return NODES.map((n) => n.ip);
  }

  get names(): string[] {
    return NODES.map((n) => n.name);
  }
  ipOf(name: string): string {
    return NODES.find((n) => n.name === name)?.ip ?? '127.0.1.1';
  }
  isUp(name: string): boolean {
    return !this.#stopped.has(name);
  }

  #status(n: NodeSpec, ready: boolean) {
    const t = time();
    const cond = (type: string, status: string, reason: string, message: string) => ({
      type,
      status,
      reason,
      message,
      lastHeartbeatTime: t,
      lastTransitionTime: t,
    });
    return {
      capacity: RESOURCES,
      allocatable: RESOURCES,
      conditions: [
        cond('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
        cond('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
        cond('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
        ready
          ? cond('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status')
          : cond('Ready', 'False', 'KubeletNotReady', 'stopped by the test bed'),
      ],
      addresses: [
        { type: 'InternalIP', address: n.ip },
        { type: 'Hostname', address: n.name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: this.#kubeletPort } },
      nodeInfo: {
        machineID: n.name,
        systemUUID: n.name,
        bootID: `${n.name}-boot`,
        kernelVersion: 'testbed',
        osImage: 'Queen test bed simulated node',
        containerRuntimeVersion: 'testbed://1.0.0',
        kubeletVersion: this.#k8sVersion,
        kubeProxyVersion: '',
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
    };
  }

  async install(): Promise<void> {
    await Promise.all(NODES.map((n) => this.#installNode(n)));
    for (const n of NODES) {
      this.#timers.push(setInterval(() => void this.#renew(n).catch((e) => this.#log(`nodes: lease ${n.name}: ${(e as Error).message}`)), RENEW_MS));
      this.#timers.push(setInterval(() => void this.#postStatus(n).catch((e) => this.#log(`nodes: status ${n.name}: ${(e as Error).message}`)), RENEW_MS));
    }
  }

  async #installNode(n: NodeSpec): Promise<void> {
    const labels = {
      'kubernetes.io/hostname': n.name,
      'kubernetes.io/os': 'linux',
      'kubernetes.io/arch': 'amd64',
      'topology.kubernetes.io/zone': n.zone,
      'topology.kubernetes.io/region': 'tb-region',
      'node.kubernetes.io/instance-type': 'testbed',
    };
    // As a kubelet with --enable-controller-attach-detach (the default) marks its node: the
    // attach/detach controller attaches the volumes of its pods.
    const annotations = { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' };
    let node: any;
    try {
      node = await this.#kube.create('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: n.name, labels, annotations }, spec: {} });
    } catch (e) {
      if (!isConflict(e)) throw e;
      node = await this.#kube.mergePatch(`/api/v1/nodes/${n.name}`, { metadata: { annotations } });
    }
    await this.#kube.mergePatch(`/api/v1/nodes/${n.name}/status`, { status: this.#status(n, true) });
    try {
      await this.#kube.create('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: {
          name: n.name,
          namespace: 'kube-node-lease',
          ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: n.name, uid: node.metadata.uid }],
        },
        spec: { holderIdentity: n.name, leaseDurationSeconds: LEASE_SECONDS, renewTime: microTime() },
      });
    } catch (e) {
      if (!isConflict(e)) throw e;
      await this.#renew(n);
    }
  }

  async #renew(n: NodeSpec): Promise<void> {
    if (this.#stopped.has(n.name)) return;
    await this.#kube.mergePatch(`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${n.name}`, {
      spec: { holderIdentity: n.name, leaseDurationSeconds: LEASE_SECONDS, renewTime: microTime() },
    });
  }

  /**
   * As a kubelet posts its node's status: its own view (Ready, no pressure), every minute, and at
   * once when the API server holds another (the node-lifecycle controller's Unknown, written while
   * the API server was away and the Lease went stale). A condition's transition time moves only when
   * its status does.
   */
  async #postStatus(n: NodeSpec): Promise<void> {
    if (this.#stopped.has(n.name)) return;
    const node: any = await this.#kube.get(`/api/v1/nodes/${n.name}`);
    const held = new Map<string, { status?: string; lastTransitionTime?: string }>((node.status?.conditions ?? []).map((c: any) => [c.type, c]));
    const own = this.#status(n, true).conditions;
    const differs = own.some((c) => held.get(c.type)?.status !== c.status);
    if (!differs && Date.now() - (this.#posted.get(n.name) ?? 0) < STATUS_MS) return;
    const conditions = own.map((c) => {
      const was = held.get(c.type);
      return was?.status === c.status && was.lastTransitionTime ? { ...c, lastTransitionTime: was.lastTransitionTime } : c;
    });
    await this.#kube.mergePatch(`/api/v1/nodes/${n.name}/status`, { status: { conditions } });
    this.#posted.set(n.name, Date.now());
  }

  /** Stops (or restarts) a node's heartbeats, as when its kubelet or machine is down. */
  async setUp(name: string, up: boolean): Promise<void> {
    const n = NODES.find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name}`);
    if (up) {
      this.#stopped.delete(name);
      await this.#kube.mergePatch(`/api/v1/nodes/${n.name}/status`, { status: this.#status(n, true) });
      await this.#renew(n);
    } else {
      this.#stopped.add(name);
    }
  }

  stop(): void {
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
  }
}
