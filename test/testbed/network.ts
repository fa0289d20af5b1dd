// The pod network of the simulated nodes, as far as the Queen simulators can feel it: a node that
// stops takes its pods off the network (nothing in or out, raft or HTTP), two pods can be cut from
// each other (a partition), and NetworkPolicies are enforced on the simulators' ports. There is no
// packet filter here: the test bed works out, for every simulated Queen pod, which source
// addresses its ports must refuse, and writes that to a file the simulator re-reads
// (QUEEN_SIM_NET_FILE); the simulator leaves refused requests unanswered, as dropped packets are.
//
// Sources are told apart by their address: every pod's connections leave from its pod IP (the
// simulators bind it, the operator's containers get a preload that does, a test's client binds
// the IP of a client pod it made). Connections from this machine's other addresses are the
// node's own (kubelet probes, the test itself): NetworkPolicies do not apply to them, as most
// network plugins let a node reach its pods.
//
// What is modelled: ingress rules (podSelector, namespaceSelector, both, ipBlock; ports by number
// or name, endPort; an empty `from` or `ports` meaning all), policyTypes. Egress rules are not
// enforced.
import { renameSync, writeFileSync } from 'node:fs';
import type { Informer, KObject } from './kube.ts';
import type { Nodes } from './nodes.ts';

export interface NetRules {
  cutOff?: boolean;
  partition?: string[];
  refuse?: Record<string, string[]>;
}

interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

/** Whether labels match a LabelSelector (an empty selector matches everything). */
export function selects(sel: LabelSelector | undefined | null, labels: Record<string, string> | undefined): boolean {
  if (!sel) return false;
  const l = labels ?? {};
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (l[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(l, e.key);
    const vals = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || !vals.includes(l[e.key]!)) return false;
        break;
      case 'NotIn':
        if (has && vals.includes(l[e.key]!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

function ipToInt(ip: string): number {
  return ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
}

export function inCidr(ip: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/');
  if (!base || !/^\d+\.\d+\.\d+\.\d+$/.test(base) || !/^\d+\.\d+\.\d+\.\d+$/.test(ip)) return false;
  const n = bits === undefined ? 32 : Number(bits);
  const mask = n === 0 ? 0 : (~0 << (32 - n)) >>> 0;
  return ((ipToInt(ip) & mask) >>> 0) === ((ipToInt(base) & mask) >>> 0);
}

interface PortRef {
  number: number;
  name?: string;
}

/** The ingress policies that select `pod`, or null when none does (everything allowed). */
function ingressPolicies(pod: KObject, policies: KObject[]): KObject[] | null {
  const ns = pod.metadata.namespace;
  const selecting = policies.filter((p) => {
    if (p.metadata.namespace !== ns) return false;
    const spec = (p as any).spec ?? {};
    const types: string[] = spec.policyTypes ?? ['Ingress'];
    return types.includes('Ingress') && selects(spec.podSelector ?? {}, pod.metadata.labels);
  });
  return selecting.length ? selecting : null;
}

/** Whether `source` may reach `port` of `target` under the policies that select it. */
export function allowed(
  target: KObject,
  port: PortRef,
  source: { ip: string; pod: KObject | null },
  policies: KObject[],
  namespaceLabels: (ns: string) => Record<string, string> | undefined,
): boolean {
  for (const p of policies) {
    for (const rule of ((p as any).spec?.ingress ?? []) as any[]) {
      const ports: any[] = rule.ports ?? [];
      const portOk =
        ports.length === 0 ||
        ports.some((pp) => {
          if ((pp.protocol ?? 'TCP') !== 'TCP') return false;
          if (pp.port === undefined) return true;
          if (typeof pp.port === 'string' && !/^\d+$/.test(pp.port)) return pp.port === port.name;
          const lo = Number(pp.port);
          const hi = pp.endPort ?? lo;
          return port.number >= lo && port.number <= hi;
        });
      if (!portOk) continue;
      const from: any[] = rule.from ?? [];
      if (from.length === 0) return true;
      for (const peer of from) {
        if (peer.ipBlock) {
          if (inCidr(source.ip, peer.ipBlock.cidr) && !(peer.ipBlock.except ?? []).some((c: string) => inCidr(source.ip, c))) return true;
          continue;
        }
        const sp = source.pod;
        if (!sp) continue;
        const sns = sp.metadata.namespace!;
        const nsOk = peer.namespaceSelector ? selects(peer.namespaceSelector, namespaceLabels(sns)) : sns === p.metadata.namespace;
        const podOk = peer.podSelector ? selects(peer.podSelector, sp.metadata.labels) : true;
        if (nsOk && podOk) return true;
      }
    }
  }
  return false;
}

/**
 * The pod that holds each pod IP now. The kubelet hands an address out again once the pod that had
 * it stopped, which can be before that pod's object is gone (a namespace being deleted): the one
 * not being deleted holds it, else the newest. Without this, a policy that refuses the old pod's
 * namespace would refuse the new pod that took its address.
 */
export function ipHolders(all: KObject[]): KObject[] {
  const byIp = new Map<string, KObject>();
  const rank = (p: KObject) => [p.metadata.deletionTimestamp ? 0 : 1, Date.parse(p.metadata.creationTimestamp ?? '') || 0] as const;
  for (const p of all) {
    const ip = p.status?.podIP as string | undefined;
    if (!ip || p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed') continue;
    const held = byIp.get(ip);
    if (!held) {
      byIp.set(ip, p);
      continue;
    }
    const [a, b] = [rank(p), rank(held)];
    if (a[0] > b[0] || (a[0] === b[0] && a[1] > b[1])) byIp.set(ip, p);
  }
  return [...byIp.values()];
}

export interface PodNetworkOptions {
  pods: Informer<KObject>;
  policies: Informer<KObject>;
  namespaces: Informer<KObject>;
  nodes: Nodes;
  log: (line: string) => void;
}

export class PodNetwork {
  #o: PodNetworkOptions;
  /** The network file of each simulated Queen container, by pod uid. */
  #files = new Map<string, { file: string; container: string; last: string }>();
  /** Pairs of pods (ns/name) cut from each other. */
  #partitions = new Set<string>();
  #timer?: NodeJS.Timeout;

  constructor(o: PodNetworkOptions) {
    this.#o = o;
    const again = () => this.schedule();
    for (const inf of [o.pods, o.policies, o.namespaces]) inf.on({ add: again, update: again, delete: again });
  }

  /** The simulator of this pod's container reads its network from `file`: written now, then kept. */
  attach(pod: KObject, container: string, file: string): void {
    this.#files.set(pod.metadata.uid!, { file, container, last: '' });
    this.#write(pod.metadata.uid!, pod);
  }

  detach(uid: string): void {
    this.#files.delete(uid);
  }

  /** Cuts two pods (ns/name) from each other, or heals that cut. */
  partition(a: string, b: string, on: boolean): void {
    const key = [a, b].sort().join('|');
    if (on) this.#partitions.add(key);
    else this.#partitions.delete(key);
    this.recompute();
  }

  partitions(): string[][] {
    return [...this.#partitions].map((k) => k.split('|'));
  }

  schedule(): void {
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.recompute();
    }, 50);
    this.#timer.unref();
  }

  recompute(): void {
    const pods = this.#o.pods.list();
    const byUid = new Map(pods.map((p) => [p.metadata.uid!, p]));
    for (const uid of this.#files.keys()) {
      const pod = byUid.get(uid);
      if (pod) this.#write(uid, pod);
    }
  }

  /** What the simulator of `pod` must refuse, and whether it is off the network. */
  rulesFor(pod: KObject): NetRules {
    const rules: NetRules = {};
    if (pod.spec?.nodeName && !this.#o.nodes.isUp(pod.spec.nodeName)) rules.cutOff = true;
    const pods = ipHolders(this.#o.pods.list());
    const me = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const cut: string[] = [];
    for (const k of this.#partitions) {
      const [a, b] = k.split('|') as [string, string];
      const other = a === me ? b : b === me ? a : null;
      if (!other) continue;
      const [ns, name] = other.split('/') as [string, string];
      const ip = this.#o.pods.get(`${ns}/${name}`)?.status?.podIP;
      if (ip) cut.push(ip);
    }
    if (cut.length) rules.partition = cut;
    const policies = ingressPolicies(pod, this.#o.policies.list());
    if (policies) {
      const nsLabels = (ns: string) => this.#o.namespaces.get(ns)?.metadata.labels;
      const refuse: Record<string, string[]> = {};
      const ports: PortRef[] = [];
      for (const c of pod.spec?.containers ?? []) for (const p of c.ports ?? []) ports.push({ number: Number(p.containerPort), name: p.name });
      for (const port of ports) {
        const denied = pods
          .filter((s) => s.metadata.uid !== pod.metadata.uid)
          .filter((s) => !allowed(pod, port, { ip: s.status.podIP, pod: s }, policies, nsLabels))
          .map((s) => s.status.podIP as string);
        refuse[String(port.number)] = [...new Set(denied)].sort();
      }
      rules.refuse = refuse;
    }
    return rules;
  }

  #write(uid: string, pod: KObject): void {
    const entry = this.#files.get(uid);
    if (!entry) return;
    const text = JSON.stringify(this.rulesFor(pod));
    if (text === entry.last) return;
    try {
      writeFileSync(`${entry.file}.tmp`, text);
      renameSync(`${entry.file}.tmp`, entry.file);
      entry.last = text;
    } catch (e) {
      this.#o.log(`network: ${pod.metadata.namespace}/${pod.metadata.name}: ${(e as Error).message}`);
    }
  }
}
